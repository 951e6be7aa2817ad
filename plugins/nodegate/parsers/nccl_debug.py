"""Parse NCCL_DEBUG=INFO/WARN lines: network and IB devices chosen, GPUDirect, IB completion errors.

Example: ``parse_nccl_debug(out).ib_completion_errors[0].status`` -> ``12`` (IBV_WC_RETRY_EXC_ERR).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodegate.core.errors import ParseError
from nodegate.parsers.nccl_tests import untagged_lines

TOOL = "nccl_debug"

# `host:pid:tid [cudaDev] [file.cc:line] NCCL INFO|WARN message` (NCCL_DEBUG=INFO).
_DEBUG_RE = re.compile(
    r"^(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] (?:(?P<src>\S+:\d+) )?"
    r"NCCL (?P<level>INFO|WARN) (?P<msg>.*)$"
)
_IB_USING_RE = re.compile(r"^NET/IB : Using (?P<devs>(?:\[\d+\]\S+\s*)+)(?P<rest>.*)$")
_IB_DEV_RE = re.compile(r"\[(?P<idx>\d+)\](?P<name>[^:\s]+):(?P<port>\d+)/(?P<flags>\S+)")
_OOB_IF_RE = re.compile(r"OOB (?P<ifname>[^:\s]+):(?P<addr>[^<\s]+)<\d+>")
# An IB completion error, as each NCCL release words it (src/transport/net_ib*.cc WARN lines):
#   2.19   `NET/IB : Got completion from peer P with error 4, opcode 0, len 0, vendor err 81 (Send)`
#   2.21   `NET/IB : Got completion from peer P with status=12 opcode=0 len=0 vendor err 129 (Recv)`
#   2.23+  `NET/IB: Got completion from peer P with status=5 opcode=0 len=0 vendor err 249 (Recv)
#           localGid G remoteGidsG hca mlx5_9`
#   2.28.7 `NET/IB: ... with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) reqSize=0
#           vendor_err=129 req_type=Send localGid G remoteGidsG hca mlx5_5`
#   later  the same without reqSize/req_type; GIN: `NET/IB/GIN: Got completion ...`.
# The GID parts appear on RoCE only (no space after `remoteGids`).
_IB_COMPLETION_RE = re.compile(
    r"NET/IB(?:/GIN)?\s?: Got completion from peer (?P<peer>\S+?)(?:<(?P<port>\d+)>)? with "
    r"(?:error |status=)(?:\w+\()?(?P<status>\d+)\)?,? "
    r"opcode[ =](?:\w+\()?(?P<opcode>\d+)\)?,?"
    r"(?: len[ =](?P<len>\d+),?| reqSize=(?P<reqsize>-?\d+))? "
    r"vendor[ _]err[ =](?P<vendor>\d+)(?: \((?P<dir>\w+)\))?(?: req_type=(?P<rtype>\w+))?"
    r"(?:\s+localGid\s+(?P<lgid>\S+))?(?:\s+remoteGids?\s*(?P<rgid>\S+))?"
    r"(?:\s+hca (?P<hca>\S+))?"
)


@dataclass(frozen=True, slots=True)
class NcclIbDevice:
    """One `[i]mlx5_0:1/IB/SHARP` entry of `NET/IB : Using`; link is `IB` or `RoCE`."""

    index: int
    name: str
    port: int
    link: str
    sharp: bool


@dataclass(frozen=True, slots=True)
class NcclIbCompletionError:
    """A `NET/IB : Got completion ... with error|status=N` WARN; status is the ibv_wc_status."""

    host: str
    peer: str
    status: int
    opcode: int
    length: int | None  # `len` (<= 2.28.3) or `reqSize` (2.28.7); absent from later releases
    vendor_err: int
    direction: str | None
    local_gid: str | None
    remote_gid: str | None
    hca: str | None  # the local HCA, printed by NCCL >= 2.23


@dataclass(frozen=True, slots=True)
class NcclDebugFacts:
    """What NCCL_DEBUG=INFO lines say about transport choice and IB errors."""

    hosts: tuple[str, ...]
    network: str | None  # `Using network IB|IBext|Socket`
    ib_devices: tuple[NcclIbDevice, ...]
    relaxed_ordering: bool | None
    oob_interface: str | None
    sharp: bool | None
    gdr: bool | None  # GPUDirect RDMA seen on a channel (`/GDRDMA`) or reported disabled
    nranks: int | None
    warnings: tuple[str, ...]
    ib_completion_errors: tuple[NcclIbCompletionError, ...]


def _opt_int(v: str | None) -> int | None:
    return None if v is None else int(v)


def parse_nccl_debug(text: str) -> NcclDebugFacts:
    """Parse the NCCL INFO/WARN lines of a capture; other lines are ignored."""
    hosts: set[str] = set()
    network = oob = None
    devices: tuple[NcclIbDevice, ...] = ()
    relaxed: bool | None = None
    gdr: bool | None = None
    nranks: int | None = None
    warns: list[str] = []
    completions: list[NcclIbCompletionError] = []
    for line in untagged_lines(text):
        m = _DEBUG_RE.match(line)
        if m is None:
            continue
        hosts.add(m["host"])
        msg = m["msg"].strip()
        if m["level"] == "WARN":
            warns.append(msg)
            if c := _IB_COMPLETION_RE.search(msg):
                completions.append(
                    NcclIbCompletionError(
                        host=m["host"],
                        peer=c["peer"],
                        status=int(c["status"]),
                        opcode=int(c["opcode"]),
                        length=_opt_int(c["len"] if c["len"] is not None else c["reqsize"]),
                        vendor_err=int(c["vendor"]),
                        direction=c["dir"] or c["rtype"],
                        local_gid=c["lgid"],
                        remote_gid=c["rgid"],
                        hca=c["hca"],
                    )
                )
        elif u := _IB_USING_RE.match(msg):
            devices = tuple(
                NcclIbDevice(
                    index=int(d["idx"]),
                    name=d["name"],
                    port=int(d["port"]),
                    link=d["flags"].split("/")[0],
                    sharp="SHARP" in d["flags"].split("/")[1:],
                )
                for d in _IB_DEV_RE.finditer(u["devs"])
            )
            relaxed = "[RO]" in u["rest"]
            # The device list always ends with `; OOB if:addr<n>`: without it the line was cut.
            if (o := _OOB_IF_RE.search(u["rest"])) is None:
                raise ParseError(TOOL, f"NET/IB device line cut short: {line[-60:]!r}")
            oob = o["ifname"]
        elif n := re.match(r"Using network (\S+)", msg):
            network = n[1]
        elif n := re.search(r"\bnranks (\d+)\b", msg):
            nranks = int(n[1])
        elif "/GDRDMA" in msg or "GPU Direct RDMA Enabled" in msg:
            gdr = True
        elif "GPU Direct RDMA Disabled" in msg and gdr is None:
            gdr = False
    if not hosts:
        raise ParseError(TOOL, "no 'host:pid:tid [dev] NCCL INFO|WARN' lines")
    return NcclDebugFacts(
        hosts=tuple(sorted(hosts)),
        network=network,
        ib_devices=devices,
        relaxed_ordering=relaxed,
        oob_interface=oob,
        sharp=any(d.sharp for d in devices) if devices else None,
        gdr=gdr,
        nranks=nranks,
        warnings=tuple(warns),
        ib_completion_errors=tuple(completions),
    )
