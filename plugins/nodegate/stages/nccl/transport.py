"""The transport NCCL used, judged per host (pure: no I/O): `nccl.transport`.

Each multi-node job runs with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET; the parser
(`parsers/nccl_debug.py`) reads what NCCL chose on each host, the job's reading maps each host
to its node by the rank table. A node whose NCCL used a network the profile does not allow, or
ran without GPU Direct RDMA where the profile requires it, or without NVLS / CollNet where it
expects them, or off the HCAs it names, is a FAIL for that node, whatever the bandwidth: the
host's lines are the evidence. No line saying what the profile asks about is an ERROR (fail
closed): the job did not show the transport. Single-node jobs do not count (no network there:
NCCL prints its IB devices but no channel crosses them).
"""

from __future__ import annotations

from dataclasses import dataclass

from nodegate.parsers.nccl_debug import NcclHostTransport
from nodegate.stages.nccl.profile import Transport


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing the host's NCCL did against the profile (or could not be told)."""

    component: str  # `nccl/net`, an HCA (`mlx5_3`), `nccl/gdr`, `nccl/nvls`, `nccl/collnet`
    reason: str
    kind: str  # what the profile asks: `net`, `gdr`, `nvls`, `collnet`, `hcas`


def _net(h: NcclHostTransport, policy: Transport) -> tuple[list[Finding], list[Finding]]:
    used = list(dict.fromkeys([*h.channel_nets, *h.networks]))
    if not used:
        return [], [Finding("nccl/net", "no NCCL_DEBUG line says which network NCCL used", "net")]
    bad = [n for n in used if n not in policy.net]
    if not bad:
        return [], []
    why = f"NCCL used NET/{bad[0]}"
    if bad[0] == "Socket" and h.socket_devices:
        why += f" over {', '.join(h.socket_devices)}"
    if h.ib_no_device:
        why += " after NET/IB found no device"
    return [Finding("nccl/net", f"{why} (the profile allows {', '.join(policy.net)})", "net")], []


def _gdr(h: NcclHostTransport) -> tuple[list[Finding], list[Finding]]:
    if h.gdr is None:
        said = "no NCCL_DEBUG line says whether GPU Direct RDMA was used"
        return [], [Finding("nccl/gdr", said, "gdr")]
    if h.gdr:
        return [], []
    off = [hca for hca, on in h.gdr_hcas if not on]
    parts = []
    if off:
        parts.append(f"GPU Direct RDMA Disabled for HCA {', '.join(off)}")
    if h.net_channels:
        parts.append(f"{h.net_channels - h.gdr_channels} NET channel line(s) without GDRDMA")
    if h.rings_gdr is False:
        parts.append("rings connected with GDR 0")
    why = "; ".join(parts) + " (the profile requires GPU Direct RDMA)"
    return [Finding(off[0] if off else "nccl/gdr", why, "gdr")], []


def _hcas(h: NcclHostTransport, policy: Transport) -> tuple[list[Finding], list[Finding]]:
    used = {d.name for d in h.ib_devices}
    if not used:
        return [], [Finding("nccl/net", "no NET/IB device line", "hcas")]
    missing = [x for x in policy.hcas if x not in used]
    if not missing:
        return [], []
    why = f"NCCL did not use {', '.join(missing)} (NET/IB : Using {', '.join(sorted(used))})"
    return [Finding(missing[0], why, "hcas")], []


def _nvls(h: NcclHostTransport) -> tuple[list[Finding], list[Finding]]:
    if h.nvls_support is None:
        return [], [Finding("nccl/nvls", "no 'NVLS multicast support' line", "nvls")]
    if h.nvls_support and h.nvls_channels != 0:
        return [], []
    why = "NVLS multicast support is not available" if not h.nvls_support else "0 nvls channels"
    return [Finding("nccl/nvls", f"{why} (the profile expects NVLS)", "nvls")], []


def _collnet(h: NcclHostTransport) -> tuple[list[Finding], list[Finding]]:
    if h.collnet or h.sharp:
        return [], []
    why = "no CollNet channel and no SHARP device (the profile expects CollNet/SHARP)"
    return [Finding("nccl/collnet", why, "collnet")], []


def findings(h: NcclHostTransport, policy: Transport) -> tuple[list[Finding], list[Finding]]:
    """(what the host did against the profile: FAIL, what its lines do not say: ERROR)."""
    bad, unknown = _net(h, policy)
    if bad or unknown:  # off the allowed network or not saying: the rest follows from it
        return bad, unknown
    asked = [
        _hcas(h, policy) if policy.hcas else ([], []),
        _gdr(h) if policy.gdr == "required" else ([], []),
        _nvls(h) if policy.nvls == "expected" else ([], []),
        _collnet(h) if policy.collnet == "expected" else ([], []),
    ]
    return [f for b, _ in asked for f in b], [f for _, u in asked for f in u]
