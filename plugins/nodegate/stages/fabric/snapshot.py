"""The golden snapshot: a known-good fabric's discovered cabling, written from a run's evidence
(`nodegate fabric snapshot RUN_DIR --out FILE`) and diffed against by later runs (the
inventory's `settings.fabric_snapshot`): a node's rail that lands elsewhere, or a leaf uplink
that moved or went dark, is named by both ends ("this cable moved").

The document (schema `fabric_snapshot`): per subnet, each node's devices -> {switch, port}, and
each leaf's uplinks, port -> the far end (`spine01 P3`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nodegate.core import schemas
from nodegate.core.errors import ConfigError, ParseError
from nodegate.parsers.ib_sysfs import parse_ib_sysfs
from nodegate.parsers.ibnetdiscover import parse_ibnetdiscover_ports
from nodegate.stages.fabric.commands import DISCOVER, GUIDS
from nodegate.stages.fabric.topology import Topology
from nodegate.transport.evidence import read_capture

SCHEMA = "fabric_snapshot"
STAGE = "fabric"


def _stdout(doc: Mapping[str, Any], cmd: str) -> str | None:
    c = (doc.get("commands") or {}).get(cmd)
    if not isinstance(c, Mapping) or c.get("rc") != 0 or c.get("timed_out"):
        return None
    out = c.get("stdout")
    return out if isinstance(out, str) else None


def snapshot_of_run(run_dir: Path) -> dict[str, Any]:
    """The snapshot of the fabric a run discovered (its raw evidence), validated."""
    topologies, guids = run_topologies(run_dir)
    subnets = {subnet: _subnet(topo, guids) for subnet, topo in topologies.items()}
    doc = {"schema_version": 1, "run": str(run_dir), "subnets": subnets}
    schemas.validate(SCHEMA, doc)
    return doc


def run_topologies(run_dir: Path) -> tuple[dict[str, Topology], dict[str, str]]:
    """Each subnet's topology as the run's first usable observer read it, and the port GUIDs
    of the run's nodes (GUID -> "node device"); ConfigError without fabric evidence."""
    raw = run_dir / "raw"
    if not raw.is_dir():
        raise ConfigError(f"{run_dir}: not a run directory (no raw/)")
    docs: dict[str, Mapping[str, Any]] = {}
    for node_dir in sorted(p for p in raw.iterdir() if p.is_dir()):
        capture = read_capture(raw, node_dir.name, STAGE)
        if capture is not None:
            docs[node_dir.name] = capture
    if not docs:
        raise ConfigError(f"{run_dir}: no fabric stage evidence under raw/ (run the fabric stage)")
    guids: dict[str, str] = {}  # port GUID -> "node device"
    for node, node_doc in docs.items():
        text = _stdout(node_doc, GUIDS)
        if text is None:
            continue
        try:
            for d in parse_ib_sysfs(text).devices:
                if d.node_guid is not None:
                    guids["0x" + d.node_guid] = f"{node} {d.name}"
        except ParseError:
            continue
    topologies: dict[str, Topology] = {}
    prefix = DISCOVER + "_"
    names = sorted({c[len(prefix) :] for d in docs.values() for c in d.get("commands") or {}
                    if c.startswith(prefix)})  # fmt: skip
    for subnet in names:
        topo = _first_topology(docs, prefix + subnet)
        if topo is None:
            raise ConfigError(f"{run_dir}: no observer read subnet {subnet} (ibnetdiscover)")
        topologies[subnet] = topo
    return topologies, guids


def _first_topology(docs: Mapping[str, Mapping[str, Any]], cmd: str) -> Topology | None:
    for doc in docs.values():
        text = _stdout(doc, cmd)
        if text is None:
            continue
        try:
            return Topology.of(parse_ibnetdiscover_ports(text))
        except ParseError:
            continue
    return None


def _subnet(topo: Topology, guids: Mapping[str, str]) -> dict[str, Any]:
    nodes: dict[str, dict[str, dict[str, Any]]] = {}
    for guid, port in sorted(topo.ca_ports.items()):
        if guid not in guids:
            continue  # a CA no node of the run owns (a storage node, the SM's host)
        node, device = guids[guid].split(" ", 1)
        nodes.setdefault(node, {})[device] = {"switch": port.switch.name, "port": port.port}
    uplinks = {
        leaf.name: {str(u.local.port): u.remote.label for u in topo.uplinks(leaf) if u.remote}
        for leaf in topo.leaves()
    }
    return {"nodes": dict(sorted(nodes.items())), "uplinks": uplinks}


def write_snapshot(run_dir: Path, out: Path) -> dict[str, Any]:
    doc = snapshot_of_run(run_dir)
    out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return doc


def load_snapshot(path: str | Path) -> dict[str, Any]:
    """A snapshot file, validated (ConfigError naming the file otherwise)."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read the fabric snapshot: {exc.strerror}") from None
    except ValueError as exc:
        raise ConfigError(f"{p}: not a fabric snapshot (JSON: {exc})") from None
    errors = schemas.problems(SCHEMA, doc)
    if errors:
        e = errors[0]
        raise ConfigError(f"{p}: not a fabric snapshot: {schemas.where(e)}: {e.message}")
    got: dict[str, Any] = doc
    return got
