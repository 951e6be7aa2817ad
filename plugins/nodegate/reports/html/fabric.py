"""report.html's fabric: spines, leaves and the cables between them drawn from the observer's
discovery (its raw evidence, `ibnetdiscover -p`), each leaf with the node rails that land on it
(the fabric.cable.expected verdicts), faulty parts marked: a leaf with a failing node rail, an
uplink or switch on the repair list (admission.json `infrastructure`).

Data for the template only (it draws the SVG); nothing here reads a node's output but through
the parsers, and every name drawn is escaped by the template.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodegate.core.errors import ParseError
from nodegate.parsers.ibnetdiscover import parse_ibnetdiscover_ports
from nodegate.stages.fabric import STAGE as FABRIC
from nodegate.stages.fabric.topology import Topology
from nodegate.transport.evidence import resolve_evidence

BOX_W, BOX_H, GAP, TOP, ROW = 86, 34, 8, 20, 150
MAX_LEAVES = 96  # a wider fabric is listed, not drawn


@dataclass
class Box:
    x: int
    y: int
    name: str
    bad: bool
    note: str = ""
    title: str = ""


@dataclass
class Wire:
    x1: int
    y1: int
    x2: int
    y2: int
    bad: bool
    title: str


@dataclass
class FabricView:
    """One subnet's drawing."""

    subnet: str
    width: int
    height: int
    spines: list[Box] = field(default_factory=list)
    leaves: list[Box] = field(default_factory=list)
    wires: list[Wire] = field(default_factory=list)
    faults: list[tuple[str, str]] = field(default_factory=list)  # (part, what)
    drawn: bool = True
    leaf_count: int = 0


def _cable_check() -> str:
    return next(c.id for c in FABRIC.checks if c.placement)


def _discovery(run_dir: Path, verdicts: Iterable[Mapping[str, Any]]) -> dict[str, Topology]:
    """subnet -> the topology an observer read (the first discovery a verdict cites)."""
    out: dict[str, Topology] = {}
    tried: set[str] = set()
    for v in verdicts:
        for ref in v.get("evidence") or ():
            cmd = ref.partition("#")[2]
            if not cmd.startswith("ibnetdiscover_") or ref in tried:
                continue
            tried.add(ref)
            subnet = cmd.removeprefix("ibnetdiscover_")
            if subnet in out:
                continue
            try:
                doc = resolve_evidence(run_dir, ref)
                out[subnet] = Topology.of(parse_ibnetdiscover_ports(str(doc.get("stdout", ""))))
            except (OSError, ValueError, KeyError, ParseError):
                continue
    return out


def fabric_views(
    run_dir: Path | None, admission: Mapping[str, Any], vdoc: Mapping[str, Any]
) -> list[FabricView]:
    """Each discovered subnet's drawing; none when the fabric stage did not run here."""
    if run_dir is None:
        return []
    ids = {c.id for c in FABRIC.checks}
    verdicts = [v for v in vdoc.get("verdicts", ()) if v.get("check") in ids]
    if not verdicts:
        return []
    topos = _discovery(run_dir, verdicts)
    infra = admission.get("infrastructure") or []
    bad_parts = {str(i["component"]).split(" ")[0] for i in infra}  # the switch named first
    bad_cables = {str(i["component"]) for i in infra}
    cable = _cable_check()
    per_leaf: dict[str, list[str]] = {}
    bad_rails: dict[str, list[str]] = {}
    for v in verdicts:
        landing = v.get("observed")
        if v["check"] == cable and isinstance(landing, str) and " P" in landing:
            leaf = landing.rsplit(" P", 1)[0]
            rail = str(v.get("component", "")).split(" -> ")[0]
            per_leaf.setdefault(leaf, []).append(f"{v['node']} {rail}")
        if v["status"] != "pass":
            comp = str(v.get("component", ""))
            far = comp.split(" -> ", 1)[1] if " -> " in comp else ""
            leaf = far.rsplit(" P", 1)[0] if far else ""
            if leaf:
                bad_rails.setdefault(leaf, []).append(f"{v['node']} {comp}: {v['check']}")
    return [
        _view(name, topo, per_leaf, bad_rails, bad_parts, bad_cables, infra)
        for name, topo in sorted(topos.items())
    ]


def _view(
    subnet: str,
    topo: Topology,
    per_leaf: Mapping[str, list[str]],
    bad_rails: Mapping[str, list[str]],
    bad_parts: set[str],
    bad_cables: set[str],
    infra: list[Mapping[str, Any]],
) -> FabricView:
    leaves = list(topo.leaves())
    leaf_guids = {s.guid for s in leaves}
    spines = sorted((s for s in topo.switches.values() if s.guid not in leaf_guids),
                    key=lambda s: (s.name, s.guid))  # fmt: skip
    faults = [(str(i["component"]), str(i["message"])) for i in infra]
    for leaf, rails in sorted(bad_rails.items()):
        faults += [(leaf, r) for r in rails]
    cols = max(len(leaves), len(spines), 1)
    view = FabricView(subnet, cols * (BOX_W + GAP) + GAP, TOP + ROW + BOX_H + 30, faults=faults,
                      leaf_count=len(leaves))  # fmt: skip
    if len(leaves) > MAX_LEAVES:
        view.drawn = False
        return view
    sx = {s.guid: GAP + i * (BOX_W + GAP) for i, s in enumerate(spines)}
    lx = {s.guid: GAP + i * (BOX_W + GAP) for i, s in enumerate(leaves)}
    for s in spines:
        view.spines.append(Box(sx[s.guid], TOP, s.name, s.name in bad_parts, title=s.name))
    for s in leaves:
        rails = per_leaf.get(s.name, [])
        broken = bad_rails.get(s.name, [])
        note = f"{len(rails)} rails" + (f", {len(broken)} faulty" if broken else "")
        title = "\n".join([s.name, *rails[:64], *broken[:16]])
        view.leaves.append(Box(lx[s.guid], TOP + ROW, s.name, bool(broken) or s.name in bad_parts,
                               note, title))  # fmt: skip
        for u in topo.uplinks(s):
            if u.remote is None or u.remote.switch.guid not in sx:
                continue
            x1, x2 = lx[s.guid] + BOX_W // 2, sx[u.remote.switch.guid] + BOX_W // 2
            view.wires.append(Wire(x1, TOP + ROW, x2, TOP + BOX_H, u.label in bad_cables,
                                   u.label))  # fmt: skip
    for comp in sorted(bad_cables):  # an uplink gone dark: drawn from its leaf to nowhere
        box = next((b for b in view.leaves if comp.startswith(b.name + " P")), None)
        if box is not None and "(uplink)" in comp:
            x = box.x + BOX_W // 2
            view.wires.append(Wire(x, TOP + ROW, x, TOP + ROW - 40, True, comp))
    return view
