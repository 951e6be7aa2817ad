"""A check id is written once, in its stage's table: no other string constant in the package,
the suites or the root conftest equals a registered check id, or a dotted prefix of one used as a
pattern (`"nccl."`). Code elsewhere asks the check (`check.id`, `Check.chart`, the reach stage's
`SESSION_CHECK`), so a typo is an import or attribute error, not "check produced no verdict"."""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from nodegate.stages.registry import STAGES

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "plugins" / "nodegate"


def scanned() -> list[Path]:
    """The package, the suites and the root conftest."""
    return [*sorted(PACKAGE.rglob("*.py")), *sorted((REPO / "suites").rglob("*.py")),
            REPO / "conftest.py"]  # fmt: skip


def prefixes(ids: Iterable[str]) -> set[str]:
    """`gpu.ecc.mode` -> `gpu.`, `gpu.ecc.`: what a pattern over check ids would spell."""
    out = set()
    for i in ids:
        parts = i.split(".")
        out |= {".".join(parts[:k]) + "." for k in range(1, len(parts))}
    return out


@dataclass
class Scan:
    """Where check ids are written: in a `Check(...)` as its id (defined), or anywhere else."""

    defined: dict[str, list[str]] = field(default_factory=dict)  # id -> "path:line" of each
    stray: list[str] = field(default_factory=list)  # "path:line: 'literal'"


def _definitions(tree: ast.AST) -> set[int]:
    """The nodes that are a `Check(...)` call's id (first argument or `id=`)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", "")
            if name == "Check":
                first = node.args[0] if node.args else None
                first = first or next((k.value for k in node.keywords if k.arg == "id"), None)
                if first is not None:
                    out.add(id(first))
    return out


def scan(files: Iterable[Path], ids: Collection[str], root: Path = REPO) -> Scan:
    """Every string constant equal to a check id or to a dotted prefix of one."""
    pats = set(ids) | prefixes(ids)
    out = Scan()
    for path in files:
        if not path.exists():
            continue
        tree = ast.parse(path.read_text(), str(path))
        defs = _definitions(tree)
        where = path.relative_to(root)
        hits = [
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in pats
        ]
        for node in sorted(hits, key=lambda n: (n.lineno, n.col_offset)):
            if id(node) in defs and node.value in ids:
                out.defined.setdefault(node.value, []).append(f"{where}:{node.lineno}")
            else:
                out.stray.append(f"{where}:{node.lineno}: {node.value!r}")
    return out


def test_each_check_id_is_written_once_in_its_stages_table() -> None:
    ids = {c.id: s.name for s in STAGES for c in s.checks}
    found = scan(scanned(), ids)
    assert found.stray == []
    assert {i: w for i, w in found.defined.items() if len(w) != 1} == {}
    assert set(found.defined) == set(ids)
    # ... and in the stage's own package.
    assert {
        i: w[0]
        for i, w in found.defined.items()
        if not w[0].startswith(f"plugins/nodegate/stages/{ids[i]}/")
    } == {}


def test_the_scan_finds_a_second_literal_a_prefix_and_a_second_table(tmp_path: Path) -> None:
    code = tmp_path / "toy.py"
    code.write_text(
        'T = CheckTable("toy", [Check("toy.a.b", "t", fn, "node", "test_a")])\n'
        'v = judged("toy.a.b", node, True, "c", 1, 1)\n'
        'ours = [v for v in vs if v.check.startswith("toy.a.")]\n'
        'other = checks.Check(id="toy.a.b", title="t", fn=None, component_kind="n", test="t")\n'
        'text = "see toy.a.b"  # a message naming a check is not the id\n'
    )
    found = scan([code], {"toy.a.b"}, tmp_path)
    assert found.defined == {"toy.a.b": ["toy.py:1", "toy.py:4"]}
    assert found.stray == ["toy.py:2: 'toy.a.b'", "toy.py:3: 'toy.a.'"]


def test_every_stage_judges_through_a_check_table() -> None:
    """Every stage has a table the scan reads (a CheckSpec tuple would slip past `Check(...)`)."""
    assert Counter(type(s.checks).__name__ for s in STAGES) == {"CheckTable": len(STAGES)}
