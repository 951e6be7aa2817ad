"""Dump the repr() of a stage's facts and verdicts, to diff parser changes against old code.

    .venv/bin/python bench/compare_facts.py --run /work/bench/before/1024-ssh --nodes 64 \
        --out /tmp/new.txt
    PYTHONPATH=/tmp/ng-base/plugins .venv/bin/python bench/compare_facts.py ... --out /tmp/old.txt
    cmp /tmp/old.txt /tmp/new.txt

Three sources, per stage in --stages: the first --nodes reachable nodes of a run's raw evidence
(facts and `judge_node` verdicts), the simulated node's answers with each of the stage's sim
faults (facts and verdicts under every profile of inventories/profiles), and every corpus file
(tests/fixtures/corpus, --corpus dirs) fed whole and cut short to each parser of the stage
(the result's repr, or the ParseError's message). The code judged is whichever `nodegate` the
interpreter imports first (PYTHONPATH wins over the editable install); its path is printed.
"""

from __future__ import annotations

import argparse
import importlib
import json
import shlex
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_parsers import outcome_of  # noqa: E402

# Stage -> its parsers ("module:function") and the sim module holding its tools and FAULTS.
PARSERS: dict[str, tuple[str, ...]] = {
    "pcie_gpu": (
        "nvsmi_text:parse_nvsmi_text",
        "nvsmi_xml:parse_nvsmi_xml",
        "lspci:parse_lspci",
        "lspci_bridges:parse_lspci_view",
        "nvlink:parse_nvlink_status",
        "journalctl:parse_kernel_window",
        "kernel_log:parse_kernel_log",
        "fabricmanager:parse_fabricmanager_status",
        "dcgm_json:parse_dcgmi_diag_json",
    ),
}
SIM_TOOLS = {"pcie_gpu": "nodegate.sim.tools.pcie_gpu"}
# Fractions of a corpus file's length it is also fed cut at (truncated output).
CUTS = (0.25, 0.5, 0.75)


def _verdicts(st: Any, node: str, facts: Any, prof: Any) -> Iterator[str]:
    yield repr(facts)
    for v in st.checks.judge_node(node, facts, prof):
        yield repr(v)


def run_nodes(run: Path, name: str, limit: int) -> Iterator[str]:
    """Facts and verdicts of the first `limit` reachable nodes of the run."""
    from nodegate.profiles import ProfileLibrary
    from nodegate.stages.registry import stage
    from nodegate.transport.evidence import evidence_file, open_evidence

    st = stage(name)
    lib = ProfileLibrary([REPO / "inventories" / "profiles"])
    adm = json.loads((run / "admission.json").read_text())
    done = 0
    for node, d in adm["nodes"].items():
        if done == limit:
            break
        path = run / "raw" / node / f"{name}.json"
        if evidence_file(path) is None or not d["profile"]:
            continue
        doc = open_evidence(path)
        if doc.get("kind", "session") != "session" or doc["reach"] != "ok":
            continue
        prof = st.profile_of(lib.get(d["profile"]))
        outcome = outcome_of(doc)
        yield f"== run {node} {name}"
        yield from _verdicts(st, node, st.facts(outcome, prof), prof)
        done += 1


def sim_nodes(name: str) -> Iterator[str]:
    """Facts and verdicts of the simulated node, healthy and with each sim fault."""
    from nodegate.core.values import CommandResult, NodeOutcome, Reach
    from nodegate.profiles import load_profile_file
    from nodegate.sim.fleet_model import Fault, SimNode
    from nodegate.sim.tools import answer
    from nodegate.stages.registry import stage
    from nodegate.transport.script import command_line

    sim = importlib.import_module(SIM_TOOLS[name])
    st = stage(name)
    profiles = sorted((REPO / "inventories" / "profiles").glob("[!_]*.yaml"))
    for fault in (None, *sorted(sim.FAULTS)):
        faults = (Fault(fault),) if fault else ()
        node = SimNode("gpu001", 0, "127.0.0.1", {}, {"nvidia_driver": "535.161.08"}, faults)
        tools = {t.name: t for t in sim.tools(node)}
        answers: dict[str, tuple[int, str, str]] = {}
        for path in profiles:
            prof = st.profile_of(load_profile_file(path))
            results = {}
            for spec in st.commands(None, load_profile_file(path)):
                cmd = command_line(spec.argv)
                if cmd not in answers:
                    argv = shlex.split(cmd)
                    r = answer(tools[argv[0]], argv[1:])
                    answers[cmd] = (r.rc, r.stdout, r.stderr)
                rc, out, err = answers[cmd]
                results[spec.id] = CommandResult(
                    spec.id, cmd, rc, out, err, 0.1, evidence=f"raw/gpu001/{name}#{spec.id}"
                )
            yield f"== sim {name} fault={fault} profile={path.stem}"
            outcome = NodeOutcome("gpu001", Reach.OK, results, "")
            yield from _verdicts(st, "gpu001", st.facts(outcome, prof), prof)


def corpus_inputs(name: str, dirs: list[Path]) -> Iterator[str]:
    """Every parser of the stage on every corpus file, whole and cut short."""
    from nodegate.core.errors import ParseError

    parsers: list[tuple[str, Callable[[str], Any]]] = []
    for ref in PARSERS[name]:
        mod, func = ref.split(":")
        parsers.append((ref, getattr(importlib.import_module(f"nodegate.parsers.{mod}"), func)))
    files = sorted(p for d in dirs for p in d.rglob("*") if p.is_file() and p.name != "INDEX.md")
    for path in files:
        text = path.read_text(errors="replace")
        variants = [("whole", text), ("-lastline", text.rstrip("\n").rpartition("\n")[0])]
        variants += [(f"cut{c}", text[: int(len(text) * c)]) for c in CUTS]
        # Line ends, escape codes and other line breaks as a node may print them.
        variants += [
            ("crlf", text.replace("\n", "\r\n")),
            ("ansi", text.replace("\n", "\n\x1b[0m", 40)),
            ("vt", text.replace(", ", ",\x0b ", 40)),
        ]
        for ref, parse in parsers:
            for label, body in variants:
                try:
                    got = repr(parse(body))
                except ParseError as exc:
                    got = f"ParseError: {exc}"
                except Exception as exc:  # noqa: BLE001 - a crash must show in the diff too
                    got = f"{type(exc).__name__}: {exc}"
                yield f"== corpus {path.relative_to(path.parents[2])} {label} {ref}\n{got}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", default=str(REPO / "reports" / "latest"))
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--stages", default="pcie_gpu", help="comma-separated")
    ap.add_argument("--corpus", action="append", type=Path, default=[])
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    import nodegate

    dirs = [REPO / "tests" / "fixtures" / "corpus", *a.corpus]
    counts = {"run": 0, "sim": 0, "corpus": 0}
    with a.out.open("w") as out:
        for name in a.stages.split(","):
            for source, lines in (
                ("run", run_nodes(Path(a.run), name, a.nodes)),
                ("sim", sim_nodes(name)),
                ("corpus", corpus_inputs(name, dirs)),
            ):
                for line in lines:
                    counts[source] += line.startswith("== ")
                    out.write(line + "\n")
    print(f"{nodegate.__file__}: {counts} -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
