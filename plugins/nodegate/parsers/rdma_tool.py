"""Parsers for iproute2 `rdma dev` / `rdma link`. (`ibdev2netdev`, Mellanox OFED's script, is not
parsed: `rdma link` prints the same device -> netdev mapping and states, on any driver.)

Device names are taken as printed (bnxt_re0, rxe_0, mlx5_bond_0): nothing assumes mlx5.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from nodegate.core.errors import ParseError
from nodegate.parsers.ib_rate import canonical_guid, state_with_code
from nodegate.parsers.text import clean_lines, natural_key

_DEV_RE = re.compile(r"^(?P<index>\d+):\s+(?P<name>[^\s:]+):\s*(?P<rest>.*)$")
_LINK_RE = re.compile(r"^link\s+(?P<dev>[^\s/]+)/(?P<port>\d+)\s*(?P<rest>.*)$")
_CAPS_RE = re.compile(r"^caps:\s*<(?P<caps>[^>]*)>$")


@dataclass(frozen=True, slots=True)
class RdmaDev:
    """One `rdma dev` line; GUIDs as 16 lowercase hex digits."""

    index: int
    name: str
    node_type: str | None
    protocol: str | None  # not printed by older iproute2
    fw: str | None
    node_guid: str | None
    sys_image_guid: str | None
    caps: tuple[str, ...]  # `rdma dev -d` only
    extra: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class RdmaDevReport:
    """All devices, sorted by index."""

    devices: tuple[RdmaDev, ...]


@dataclass(frozen=True, slots=True)
class RdmaLink:
    """One `rdma link` line; state/phys_state as printed plus their IBTA codes."""

    device: str
    port: int
    state: str
    state_code: int
    phys_state: str
    phys_state_code: int
    netdev: str | None
    lid: int | None
    sm_lid: int | None
    lmc: int | None
    subnet_prefix: str | None
    extra: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class RdmaLinkReport:
    """All links, sorted naturally by (device, port)."""

    links: tuple[RdmaLink, ...]


def _pairs(tool: str, lineno: int, rest: str) -> dict[str, str]:
    tokens = rest.split()
    if len(tokens) % 2:
        raise ParseError(tool, f"line {lineno}: odd key/value list {rest[:80]!r}")
    return dict(zip(tokens[::2], tokens[1::2], strict=True))


def _int_or_none(tool: str, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value, 0)
    except ValueError:
        raise ParseError(tool, f"{value!r} is not a number") from None


def parse_rdma_dev(text: str) -> RdmaDevReport:
    """Parse `rdma dev [show] [-d]`: `0: bnxt_re0: node_type ca protocol roce fw ...`."""
    devs: list[tuple[int, str, dict[str, str], list[str]]] = []
    for lineno, raw in enumerate(clean_lines(text), 1):
        line = raw.strip()
        if not line:
            continue
        if m := _DEV_RE.match(line):
            devs.append((int(m["index"]), m["name"], _pairs("rdma dev", lineno, m["rest"]), []))
            continue
        caps = _CAPS_RE.match(line)
        if caps is None or not devs or not raw[:1].isspace():
            raise ParseError("rdma dev", f"line {lineno}: unrecognised line {line[:60]!r}")
        devs[-1][3].extend(c.strip() for c in caps["caps"].split(",") if c.strip())
    if not devs:
        raise ParseError("rdma dev", "no '<index>: <name>: ...' line found")
    known = ("node_type", "protocol", "fw", "node_guid", "sys_image_guid")
    out = []
    for index, name, kv, caps_list in devs:
        guid, sys_guid = kv.get("node_guid"), kv.get("sys_image_guid")
        out.append(
            RdmaDev(
                index=index,
                name=name,
                node_type=kv.get("node_type"),
                protocol=kv.get("protocol"),
                fw=kv.get("fw"),
                node_guid=canonical_guid(guid) if guid else None,
                sys_image_guid=canonical_guid(sys_guid) if sys_guid else None,
                caps=tuple(caps_list),
                extra={k: v for k, v in kv.items() if k not in known},
            )
        )
    return RdmaDevReport(devices=tuple(sorted(out, key=lambda d: d.index)))


def parse_rdma_link(text: str) -> RdmaLinkReport:
    """Parse `rdma link [show]`: `link rxe_0/1 state ACTIVE physical_state LINK_UP netdev p1p1`."""
    links: list[RdmaLink] = []
    known = ("state", "physical_state", "netdev", "lid", "sm_lid", "lmc", "subnet_prefix")
    for lineno, raw in enumerate(clean_lines(text), 1):
        line = raw.strip()
        if not line:
            continue
        m = _LINK_RE.match(line)
        if m is None:
            raise ParseError("rdma link", f"line {lineno}: unrecognised line {line[:60]!r}")
        kv = _pairs("rdma link", lineno, m["rest"])
        # iproute2 always prints both states; a missing or unknown one means a cut line.
        if "state" not in kv or "physical_state" not in kv:
            raise ParseError("rdma link", f"line {lineno}: no state/physical_state (truncated?)")
        state, state_code = state_with_code(kv["state"], physical=False)
        phys, phys_code = state_with_code(kv["physical_state"], physical=True)
        if state_code is None or phys_code is None:
            raise ParseError("rdma link", f"line {lineno}: unknown state in {line[:80]!r}")
        links.append(
            RdmaLink(
                device=m["dev"],
                port=int(m["port"]),
                state=state,
                state_code=state_code,
                phys_state=phys,
                phys_state_code=phys_code,
                netdev=kv.get("netdev"),
                lid=_int_or_none("rdma link", kv.get("lid")),
                sm_lid=_int_or_none("rdma link", kv.get("sm_lid")),
                lmc=_int_or_none("rdma link", kv.get("lmc")),
                subnet_prefix=kv.get("subnet_prefix"),
                extra={k: v for k, v in kv.items() if k not in known},
            )
        )
    if not links:
        raise ParseError("rdma link", "no 'link <dev>/<port> ...' line found")
    return RdmaLinkReport(links=tuple(sorted(links, key=lambda x: (natural_key(x.device), x.port))))
