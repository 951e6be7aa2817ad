"""Parse NCCL_DEBUG=INFO/WARN lines: network and IB devices chosen, GPUDirect, IB completion errors.

Example: ``parse_nccl_debug(out).ib_completion_errors[0].status`` -> ``12`` (IBV_WC_RETRY_EXC_ERR);
``parse_nccl_debug(out).per_host[0].networks`` -> ``("IB",)``: what NCCL chose on each host.

The INFO lines read per host, as NVIDIA/nccl src/ prints them (master 5067397c; v2.26.2-1 for
the corpus capture), all of them under NCCL_DEBUG_SUBSYS=INIT,NET:
- init.cc showVersion: `NCCL version 2.26.2+cuda12.2` (NCCL_ALL);
- init.cc: `Using network %s` (the net plugin: `IB`, `Socket`, or an external one's name);
- transport/net_ib/init.cc: `NET/IB : Using [0]mlx5_0:1/IB ... [RO]; OOB ib0:10.0.0.1<0>`
  (newer: a rail/plane id after the port, `mlx5_0:1:0/IB`), `NET/IB : No device found.`;
- transport/net_socket.cc: `NET/Socket : Using [0]eth0:10.0.0.1<0>`;
- graph/topo.cc: `NET/%s : GPU Direct RDMA Enabled|Disabled for HCA %d '%s'` (NCCL_NET);
- transport/net.cc: `Channel %02d/%d : r[d] -> r[d] [send|receive] via NET/%s/%d[(%d)]` then
  `/GDRDMA` when GPUDirect is used on that connection (`(PCI)`, `/Shared` may follow);
- transport/generic.cc: `Connected all rings, use ring PXN %d GDR %d`;
- transport/nvls.cc: `NVLS multicast support is [not ]available on dev %d`;
- init.cc: `%d coll channels, %d collnet channels, %d nvls channels, %d p2p channels, ...`
  (its collnet count is comm->nChannels printed twice: no sign of CollNet; the corpus RoCE
  capture prints 16 with no CollNet plugin);
- transport/coll_net.cc: `CollNet %02d/%1d : %d [send] via COLLNET/%s/%d...`, `rank %d Connected
  CollNet`; the NET/IB device flag `/SHARP` (the IB SHARP plugin's devices).
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
_IB_DEV_RE = re.compile(r"\[(?P<idx>\d+)\](?P<name>[^:\s]+):(?P<port>\d+)(?::\d*)*/(?P<flags>\S+)")
_SOCKET_USING_RE = re.compile(r"^NET/Socket : Using(?P<devs>(?: \[\d+\][^:\s]+:\S+)*)\s*$")
_SOCKET_DEV_RE = re.compile(r"\[\d+\](?P<name>[^:\s]+):")
_VERSION_RE = re.compile(r"^NCCL version (?P<v>\d+\.\d+\.\d+)\S*")
_GDR_HCA_RE = re.compile(
    r"^NET/(?P<net>\w+) : GPU Direct RDMA (?P<state>Enabled|Disabled) for HCA \d+ '(?P<hca>[^']+)'"
)
_NET_CHANNEL_RE = re.compile(
    r"^Channel \d+/\d+ : .* via NET/(?P<net>\w+)/(?P<dev>\d+)(?:\(\d+\))?(?P<gdr>/GDRDMA)?"
)
_RINGS_GDR_RE = re.compile(r"^Connected all rings, use ring PXN \d+ GDR (?P<gdr>\d+)")
_NVLS_RE = re.compile(r"^NVLS multicast support is (?P<not>not )?available on dev \d+")
_CHANNELS_RE = re.compile(
    r"^(?P<coll>\d+) coll channels, (?P<collnet>\d+) collnet channels, (?P<nvls>\d+) nvls channels"
)
_COLLNET_RE = re.compile(r"via COLLNET/|Connected CollNet")
# How many of each kind of line a host's evidence keeps (the facts use every line).
EVIDENCE_PER_KIND = 2
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
class NcclHostTransport:
    """What NCCL chose on one host (the `host` of its `host:pid:tid` lines), every rank there.

    gdr: GPUDirect RDMA on the host's network connections: the channel lines when there are
    any (every `via NET/...` with `/GDRDMA`), else `Connected all rings ... GDR n`, else the
    HCA lines (every HCA Enabled); None when no line says."""

    host: str
    nccl_version: str | None
    networks: tuple[str, ...]  # `Using network X`, distinct, in order
    ib_devices: tuple[NcclIbDevice, ...]
    ib_no_device: bool  # `NET/IB : No device found.`
    socket_devices: tuple[str, ...]  # `NET/Socket : Using [0]eth0:...` interface names
    gdr_hcas: tuple[tuple[str, bool], ...]  # (HCA, GPU Direct RDMA enabled), distinct
    channel_nets: tuple[str, ...]  # the NET/<name> of `Channel ... via NET/` lines, distinct
    net_channels: int
    gdr_channels: int  # of those, with /GDRDMA
    rings_gdr: bool | None
    gdr: bool | None
    nvls_support: bool | None
    coll_channels: int | None
    collnet_channels: int | None
    nvls_channels: int | None
    collnet: bool  # a CollNet channel or `Connected CollNet` line
    sharp: bool  # a NET/IB device flagged /SHARP
    lines: tuple[str, ...]  # evidence: up to EVIDENCE_PER_KIND lines of each kind, verbatim


class _Host:
    """Accumulates one host's transport lines."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.version: str | None = None
        self.networks: list[str] = []
        self.devices: tuple[NcclIbDevice, ...] = ()
        self.no_device = False
        self.sockets: tuple[str, ...] = ()
        self.gdr_hcas: dict[str, bool] = {}
        self.channel_nets: list[str] = []
        self.net_channels = self.gdr_channels = 0
        self.rings_gdr: bool | None = None
        self.nvls: bool | None = None
        self.channels: tuple[int, int, int] | None = None
        self.collnet = False
        self.kinds: dict[str, int] = {}
        self.lines: list[str] = []

    def keep(self, kind: str, line: str) -> None:
        n = self.kinds.get(kind, 0)
        if n < EVIDENCE_PER_KIND:
            self.lines.append(line)
        self.kinds[kind] = n + 1

    def read(self, msg: str, line: str) -> None:  # noqa: C901 - one branch per line kind
        if m := _VERSION_RE.match(msg):
            self.version = m["v"]
            self.keep("version", line)
        elif m := re.match(r"Using network (\S+)", msg):
            if m[1] not in self.networks:
                self.networks.append(m[1])
            self.keep("network " + m[1], line)
        elif msg.startswith("NET/IB : No device found"):
            self.no_device = True
            self.keep("no ib", line)
        elif m := _SOCKET_USING_RE.match(msg):
            self.sockets = tuple(d["name"] for d in _SOCKET_DEV_RE.finditer(m["devs"]))
            self.keep("socket", line)
        elif m := _GDR_HCA_RE.match(msg):
            self.gdr_hcas[m["hca"]] = self.gdr_hcas.get(m["hca"], True) and m["state"] == "Enabled"
            self.keep("gdr hca " + m["state"], line)
        elif m := _NET_CHANNEL_RE.match(msg):
            if m["net"] not in self.channel_nets:
                self.channel_nets.append(m["net"])
            self.net_channels += 1
            self.gdr_channels += m["gdr"] is not None
            self.keep(f"channel {m['net']} {m['gdr'] is not None}", line)
        elif m := _RINGS_GDR_RE.match(msg):
            self.rings_gdr = (self.rings_gdr is not False) and m["gdr"] != "0"
            self.keep("rings", line)
        elif m := _NVLS_RE.match(msg):
            self.nvls = (self.nvls is not False) and m["not"] is None
            self.keep("nvls", line)
        elif m := _CHANNELS_RE.match(msg):
            self.channels = (int(m["coll"]), int(m["collnet"]), int(m["nvls"]))
            self.keep("channels", line)
        elif _COLLNET_RE.search(msg):
            self.collnet = True
            self.keep("collnet", line)

    def facts(self) -> NcclHostTransport:
        if self.net_channels:
            gdr: bool | None = self.gdr_channels == self.net_channels
        elif self.rings_gdr is not None:
            gdr = self.rings_gdr
        elif self.gdr_hcas:
            gdr = all(self.gdr_hcas.values())
        else:
            gdr = None
        ch = self.channels
        return NcclHostTransport(
            host=self.host, nccl_version=self.version, networks=tuple(self.networks),
            ib_devices=self.devices, ib_no_device=self.no_device, socket_devices=self.sockets,
            gdr_hcas=tuple(self.gdr_hcas.items()), channel_nets=tuple(self.channel_nets),
            net_channels=self.net_channels, gdr_channels=self.gdr_channels,
            rings_gdr=self.rings_gdr, gdr=gdr, nvls_support=self.nvls,
            coll_channels=None if ch is None else ch[0],
            collnet_channels=None if ch is None else ch[1],
            nvls_channels=None if ch is None else ch[2],
            collnet=self.collnet,
            sharp=any(d.sharp for d in self.devices), lines=tuple(self.lines),
        )  # fmt: skip


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
    nccl_version: str | None = None
    per_host: tuple[NcclHostTransport, ...] = ()


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
    version: str | None = None
    warns: list[str] = []
    completions: list[NcclIbCompletionError] = []
    per_host: dict[str, _Host] = {}
    for line in untagged_lines(text):
        m = _DEBUG_RE.match(line)
        if m is None:
            continue
        hosts.add(m["host"])
        msg = m["msg"].strip()
        host = per_host.get(m["host"]) or per_host.setdefault(m["host"], _Host(m["host"]))
        if m["level"] == "INFO":
            host.read(msg, line)
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
            host.devices = devices
            host.keep("ib devices", line)
        elif n := re.match(r"Using network (\S+)", msg):
            network = n[1]
        elif n := re.search(r"\bnranks (\d+)\b", msg):
            nranks = int(n[1])
        elif "/GDRDMA" in msg or "GPU Direct RDMA Enabled" in msg:
            gdr = True
        elif "GPU Direct RDMA Disabled" in msg and gdr is None:
            gdr = False
        elif version is None and (v := _VERSION_RE.match(msg)):
            version = v["v"]
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
        nccl_version=version,
        per_host=tuple(per_host[h].facts() for h in sorted(per_host)),
    )
