"""The `traffic` profile section, typed once per profile.

traffic:
  senders: 8                               # k of the incast k->1
  line_rate_gbps: 400                      # a rail's line rate, what the shares are of
  duration_s: 10                           # ib_write_bw -D: every flow of a pattern at once
  message_bytes: 65536
  port_base: 19515                         # server slot s of rail r: port_base + 64 * r + s
  timeout_s: 60
  ready_timeout_s: 15
  seed: 0                                  # the bisection's permutations
  rails: null                              # or [0, 3]: the hca rails tested (null: all)
  overlap: {min: 0.8, unit: share}         # of the window every flow of a test ran together
  incast:
    aggregate: {min: 0.9, unit: share}     # of the receiver's line rate
    fairness: {min: 0.9, unit: Jain}       # Jain's index over the senders
    sender_share: {max: 1.5, unit: fair shares}   # no sender takes more
  victim: {min: 0.8, unit: share}          # victim during / (alone x (1 - 1/k))
  bisection:
    aggregate: {min: 0.85, unit: share}    # of N/2 x line rate
    per_flow: {min: 0.75, unit: share}     # each flow of the median
  counters:                                # RoCE rails only (null on InfiniBand)
    ecn_marked: {min: 1, unit: packets}    # np_ecn_marked_roce_packets at the receiver
    cnp_sent: {min: 1, unit: CNPs}         # np_cnp_sent at the receiver
    cnp_handled: {min: 1, unit: CNPs}      # rp_cnp_handled at every sender
    loss: {max: 0, unit: packets}          # out_of_sequence, packet_seq_err, ... growth
    pause_share: {max: 0.05, unit: share}  # rx_prio<p>_pause_duration / the window
    pause_storms: {max: 0, unit: events}   # tx_pause_storm_error_events growth
  xmit_wait: {min: 1, unit: ticks}         # InfiniBand with the fabric stage: PortXmitWait
                                           # growth at the incast receiver's switch port
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nodegate.core.thresholds import Threshold
from nodegate.profiles import Profile

SECTION = "traffic"
LOSS_COUNTERS = ("out_of_sequence", "packet_seq_err", "local_ack_timeout_err", "rx_discards_phy")


@dataclass(frozen=True, slots=True)
class Counters:
    """The RoCE counter criteria."""

    ecn_marked: Threshold
    cnp_sent: Threshold
    cnp_handled: Threshold
    loss: Threshold
    pause_share: Threshold
    pause_storms: Threshold


@dataclass(frozen=True, slots=True)
class TrafficProfile:
    """The `traffic` section of one profile."""

    senders: int
    line_rate_gbps: float
    duration_s: int
    message_bytes: int
    port_base: int
    timeout_s: float
    ready_timeout_s: float
    seed: int
    rails: tuple[int, ...] | None
    overlap: Threshold
    aggregate: Threshold
    fairness: Threshold
    sender_share: Threshold
    victim: Threshold
    bisection: Threshold
    per_flow: Threshold
    counters: Counters | None
    xmit_wait: Threshold | None = None

    @classmethod
    def of(cls, sec: Mapping[str, Any]) -> TrafficProfile:
        """From the schema-validated section."""

        def t(doc: Any, where: str) -> Threshold:
            return Threshold.from_profile(doc, f"{SECTION}.{where}")

        c = sec.get("counters")
        return cls(
            senders=int(sec["senders"]),
            line_rate_gbps=float(sec["line_rate_gbps"]),
            duration_s=int(sec["duration_s"]),
            message_bytes=int(sec["message_bytes"]),
            port_base=int(sec["port_base"]),
            timeout_s=float(sec["timeout_s"]),
            ready_timeout_s=float(sec["ready_timeout_s"]),
            seed=int(sec["seed"]),
            rails=None if sec.get("rails") is None else tuple(int(r) for r in sec["rails"]),
            overlap=t(sec["overlap"], "overlap"),
            aggregate=t(sec["incast"]["aggregate"], "incast.aggregate"),
            fairness=t(sec["incast"]["fairness"], "incast.fairness"),
            sender_share=t(sec["incast"]["sender_share"], "incast.sender_share"),
            victim=t(sec["victim"], "victim"),
            bisection=t(sec["bisection"]["aggregate"], "bisection.aggregate"),
            per_flow=t(sec["bisection"]["per_flow"], "bisection.per_flow"),
            counters=None
            if c is None
            else Counters(**{k: t(c[k], f"counters.{k}") for k in Counters.__slots__}),
            xmit_wait=None if sec.get("xmit_wait") is None else t(sec["xmit_wait"], "xmit_wait"),
        )

    def describe(self) -> str:
        """The method, as verdict messages show it."""
        return (
            f"ib_write_bw -D {self.duration_s}, {self.message_bytes} B messages, "
            f"incast {self.senders}->1"
        )


def traffic_profile(profile: Profile) -> TrafficProfile:
    """The typed `traffic` section of a profile, built once per profile."""
    return profile.typed(SECTION, TrafficProfile.of)
