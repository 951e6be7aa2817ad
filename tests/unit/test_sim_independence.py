"""The simulator imitates tools, not the stages: no module of `nodegate.sim` imports a stage.

A simulated tool that answered a stage's own command string would pass a stage with a wrong
command (issue #8); the simulated node must answer arguments the way the real tool does.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nodegate.sim

SIM = Path(nodegate.sim.__file__).parent
FORBIDDEN = ("nodegate.stages", "nodegate.ibpairs")


def _module_name(path: Path, root: Path) -> str:
    """`<root>/tools/hca.py` -> `nodegate.sim.tools.hca` (root is the sim package)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["nodegate", "sim", *parts])


def imported_modules(path: Path, root: Path) -> set[str]:
    """Every module `path` imports (relative imports resolved), at any depth of the file."""
    here = _module_name(path, root)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.startswith(FORBIDDEN)
        ):
            out.add(node.value)  # importlib.import_module("nodegate.stages...") and the like
    return out


def forbidden_imports(root: Path) -> dict[str, list[str]]:
    found = {}
    for path in sorted(root.rglob("*.py")):
        bad = sorted(m for m in imported_modules(path, root) if m.startswith(FORBIDDEN))
        if bad:
            found[str(path.relative_to(root))] = bad
    return found


def test_no_sim_module_imports_a_stage() -> None:
    assert forbidden_imports(SIM) == {}


def test_the_walk_sees_every_form_of_import(tmp_path: Path) -> None:
    pkg = tmp_path / "sim"
    (pkg / "tools").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "tools" / "__init__.py").write_text("")
    (pkg / "tools" / "a.py").write_text("from nodegate.stages.hca import SYSFS_COMMAND\n")
    (pkg / "tools" / "b.py").write_text("def f():\n    import nodegate.ibpairs.run\n")
    (pkg / "tools" / "c.py").write_text("from ...stages import hca\n")
    (pkg / "tools" / "d.py").write_text("import importlib as i\ni.import_module('nodegate.stages')")
    (pkg / "tools" / "ok.py").write_text("from nodegate.parsers.ib_pci import PCI_ATTRS\n")
    assert forbidden_imports(pkg) == {
        "tools/a.py": ["nodegate.stages.hca", "nodegate.stages.hca.SYSFS_COMMAND"],
        "tools/b.py": ["nodegate.ibpairs.run"],
        "tools/c.py": ["nodegate.stages", "nodegate.stages.hca"],
        "tools/d.py": ["nodegate.stages"],
    }
