"""A small rail-optimized fabric written in the infiniband-diags formats, for the fabric
stage's unit tests and bench: `ibnetdiscover -p` (corpus ibnetdiscover__edr-ports-excerpt-osc),
`perfquery -x -l` blocks (corpus perfquery__x-extended-edr-switch-allports), `saquery SMIR`
and `sminfo` (tests/fixtures/formats, corpus sminfo__master-prio14), the sysfs listings of
node GUIDs and P_Keys. A model with faults in, text out; the stage's code does the rest.

Leaf `leaf-<rack>-rail<r>` per rack and rail; node i of a rack on leaf port i+1; every leaf
has one uplink per spine on ports 33.. (spine s on port 33+s), spine port = leaf index + 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

COUNTERS = (
    "PortXmitData",
    "PortRcvData",
    "PortXmitPkts",
    "PortRcvPkts",
    "PortUnicastXmitPkts",
    "PortUnicastRcvPkts",
    "PortMulticastXmitPkts",
    "PortMulticastRcvPkts",
)
ERRORS = (
    "SymbolErrorCounter",
    "LinkErrorRecoveryCounter",
    "LinkDownedCounter",
    "PortRcvErrors",
    "PortRcvRemotePhysicalErrors",
    "PortRcvSwitchRelayErrors",
    "PortXmitDiscards",
    "PortXmitConstraintErrors",
    "PortRcvConstraintErrors",
    "LocalLinkIntegrityErrors",
    "ExcessiveBufferOverrunErrors",
    "VL15Dropped",
    "PortXmitWait",
    "QP1Dropped",
)


def guid(kind: int, a: int, b: int) -> str:
    return f"0x{0x0C42A10300000000 + (kind << 24) + (a << 8) + b:016x}"


@dataclass
class Fabric:
    """Nodes `gpu001..` in racks of `per_rack`; faults as data (see the fields)."""

    nodes: int = 4
    per_rack: int = 2
    rails: int = 8
    spines: int = 2
    speed: str = "NDR"
    swapped: dict[str, tuple[int, int]] = field(default_factory=dict)  # node -> rails swapped
    wrong_leaf: dict[str, tuple[int, int]] = field(
        default_factory=dict
    )  # node -> (rail, leaf rail)
    unplugged: set[tuple[str, int]] = field(default_factory=set)  # (node, rail)
    narrow: dict[tuple[str, int], str] = field(default_factory=dict)  # (node, rail) -> width
    slow: dict[tuple[str, int], str] = field(default_factory=dict)  # (node, rail) -> speed
    # (switch name, port) -> {counter: rise between the reads}
    rising: dict[tuple[str, int], dict[str, int]] = field(default_factory=dict)
    uplink_down: set[tuple[str, int]] = field(default_factory=set)  # (leaf name, spine index)
    masters: int = 1
    sm_priority: int = 15
    pkeys: dict[tuple[str, int], list[str]] = field(default_factory=dict)  # (node, rail) -> values
    old_firmware: dict[str, str] = field(default_factory=dict)  # switch name -> its version

    def names(self) -> list[str]:
        return [f"gpu{i + 1:03d}" for i in range(self.nodes)]

    def rack(self, i: int) -> str:
        return f"r{i // self.per_rack + 1:02d}"

    def ca_guid(self, node: str, rail: int) -> str:
        return guid(1, int(node[3:]), rail)

    def leaves(self) -> list[tuple[str, str, int]]:
        """(name, guid, lid) of every leaf."""
        racks = sorted({self.rack(i) for i in range(self.nodes)})
        out = []
        for k, rk in enumerate(racks):
            for r in range(self.rails):
                idx = k * self.rails + r
                out.append((f"leaf-{rk}-rail{r}", guid(2, k, r), 100 + idx))
        return out

    def spine(self, s: int) -> tuple[str, str, int]:
        return f"spine{s + 1:02d}", guid(3, 0, s), 10 + s

    def cables(
        self,
    ) -> list[tuple[tuple[str, str, int, int, str], tuple[str, str, int, int, str], str, str]]:
        """((kind, guid, lid, port, desc) x 2, width, speed): every linked cable."""
        leaves = {name: (name, g, lid) for name, g, lid in self.leaves()}
        out = []
        for i, n in enumerate(self.names()):
            for r in range(self.rails):
                if (n, r) in self.unplugged:
                    continue
                lr = r
                if n in self.swapped and r in self.swapped[n]:
                    a, b = self.swapped[n]
                    lr = b if r == a else a
                if n in self.wrong_leaf and self.wrong_leaf[n][0] == r:
                    lr = self.wrong_leaf[n][1]
                name, g, lid = leaves[f"leaf-{self.rack(i)}-rail{lr}"]
                port = i % self.per_rack + 1
                ca = ("CA", self.ca_guid(n, r), 1000 + i * 16 + r, 1, f"{n} mlx5_{r}")
                width = self.narrow.get((n, r), "4x")
                speed = self.slow.get((n, r), self.speed)
                out.append((ca, ("SW", g, lid, port, name), width, speed))
        for k, (name, g, lid) in enumerate(self.leaves()):
            for s in range(self.spines):
                if (name, s) in self.uplink_down:
                    continue
                sn, sg, slid = self.spine(s)
                out.append(
                    (("SW", g, lid, 33 + s, name), ("SW", sg, slid, k + 1, sn), "4x", self.speed)
                )
        return out

    def ibnetdiscover(self) -> str:
        lines = []
        for a, b, w, sp in self.cables():
            for x, y in ((a, b), (b, a)):
                lines.append(
                    f"{x[0]}  {x[2]:>4} {x[3]:>2} {x[1]} {w} {sp} - {y[0]}  {y[2]:>4} {y[3]:>2} "
                    f"{y[1]} ( '{x[4]}' - '{y[4]}' )"
                )
        for name, s in sorted(self.uplink_down):
            _, g, lid = next(leaf for leaf in self.leaves() if leaf[0] == name)
            lines.append(f"SW  {lid:>4} {33 + s:>2} {g} 4x ???{' ' * 36}'{name}'")
        return "\n".join(lines) + "\n"

    def switch_ports(self) -> list[tuple[str, int, int]]:
        """(switch name, lid, port) of every linked switch port."""
        out = []
        for a, b, _w, _s in self.cables():
            for x in (a, b):
                if x[0] == "SW":
                    out.append((x[4], x[2], x[3]))
        return sorted(set(out), key=lambda t: (t[1], t[2]))

    def perfquery(self, read: int) -> str:
        blocks = []
        for name, lid, port in self.switch_ports():
            rise = self.rising.get((name, port), {})
            lines = [
                f"# Port extended counters: Lid {lid} port {port} "
                "(CapMask: 0x5300 CapMask2: 0x0000002)",
                f"PortSelect:......................{port}",
                "CounterSelect:...................0x0000",
            ]
            lines += [f"{c}:{'.' * (33 - len(c))}{1000 * port + read}" for c in COUNTERS]
            lines.append("CounterSelect2:..................0x00000000")
            lines += [f"{c}:{'.' * (33 - len(c))}{rise.get(c, 0) * read}" for c in ERRORS]
            blocks.append("\n".join(lines))
        return "\n".join(blocks) + "\n"

    def smir(self) -> str:
        recs = []
        for m in range(max(self.masters, 1) + 1):
            state = 3 if m < self.masters else 2
            prio = self.sm_priority if m == 0 else 12
            recs.append(
                f"SMInfoRecord dump:\n\t\tRID\n\t\tLID...................{1 + m}\n"
                f"\t\tSMInfo dump:\n\t\tGUID..................{guid(4, 0, m)}\n"
                "\t\tSM_Key................0x0000000000000000\n"
                f"\t\tActCount..............58213\n\t\tPriority..............{prio}\n"
                f"\t\tSMState...............{state}\n"
            )
        return "".join(recs)

    def sminfo(self) -> str:
        return (
            f"sminfo: sm lid 1 sm guid {guid(4, 0, 0)}, activity count 4484381 priority "
            f"{self.sm_priority} state 3 SMINFO_MASTER\n"
        )

    def node_guids(self, node: str) -> str:
        lines = []
        for r in range(self.rails):
            lines.append(
                f"/sys/class/infiniband/mlx5_{r}/node_guid:{_colons(self.ca_guid(node, r))}"
            )
        for f, v in (
            ("state", "4: ACTIVE"),
            ("phys_state", "5: LinkUp"),
            ("rate", "400 Gb/sec (4X NDR)"),
        ):
            lines += [f"/sys/class/infiniband/mlx5_{r}/ports/1/{f}:{v}" for r in range(self.rails)]
        return "\n".join(lines) + "\n"

    def pkey_listing(self, node: str) -> str:
        lines = []
        for r in range(self.rails):
            values = self.pkeys.get((node, r), ["0xffff", "0x0000"])
            lines += [
                f"/sys/class/infiniband/mlx5_{r}/ports/1/pkeys/{i}:{v}"
                for i, v in enumerate(values)
            ]
        return "\n".join(lines) + "\n"


def _colons(g: str) -> str:
    h = g[2:]
    return ":".join(h[i : i + 4] for i in range(0, 16, 4))


FLINT_Q = """\
Image type:            FS4
FW Version:            {version}
FW Release Date:       12.3.2024
Product Version:       {version}
Description:           UID                GuidsNumber
Base GUID:             {guid}        128
Base MAC:              N/A                N/A
Image VSD:             N/A
Device VSD:            N/A
PSID:                  MT_0000000693
Security Attributes:   N/A
"""


def flint_loop(fabric: Fabric, old: dict[str, str] | None = None) -> str:
    """The stage's firmware loop: `# lid <n>` then that switch's `flint q` (corpus flint q)."""
    old = old or {}
    switches = [*(fabric.spine(s) for s in range(fabric.spines)), *fabric.leaves()]
    out = []
    for name, g, lid in sorted(switches, key=lambda s: s[2]):
        out.append(f"# lid {lid}\n" + FLINT_Q.format(version=old.get(name, "31.2012.1068"), guid=g))
    return "".join(out)
