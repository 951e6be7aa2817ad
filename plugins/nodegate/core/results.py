"""A run's results as data, and the names of the files a run directory holds.

`RunResult` is every verdict of a run by (check id, node); every layer above the stages reads
it (admission, comparison, reports) and none of them needs the engine that fills it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodegate.core.values import Verdict

# The files of a run directory (`reports/<run-id>/`), named once.
VERDICTS_FILE = "verdicts.json"
ADMISSION_FILE = "admission.json"
REPORT_FILE = "report.html"
JUNIT_FILE = "junit.xml"
ACTIONS_FILE = "actions.json"
PATCHES_FILE = "kubernetes-patches.json"
BASELINE_FILE = "baseline.json"
COMPARE_FILE = "compare.json"
RAW_DIR = "raw"


@dataclass
class RunResult:
    """Every verdict of a run, by (check id, node)."""

    verdicts: dict[tuple[str, str], list[Verdict]] = field(default_factory=dict)
    stages_run: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    connections: int = 0
    interrupted: str | None = None  # the stage running when the run was interrupted
    _written: tuple[object, ...] | None = field(default=None, repr=False, compare=False)

    def add(self, v: Verdict) -> None:
        self.verdicts.setdefault((v.check, v.node), []).append(v)

    def for_item(self, check: str, node: str) -> list[Verdict]:
        return self.verdicts.get((check, node), [])

    def rename_evidence(self, rename: Callable[[str], str]) -> int:
        """Replace every verdict's evidence references by `rename(ref)` (the run's evidence
        files renamed); returns how many changed, and the next `write` writes them."""
        changed = 0
        for key, vs in self.verdicts.items():
            new = []
            for v in vs:
                refs = tuple(rename(e) for e in v.evidence)
                if refs != v.evidence:
                    changed += 1
                    v = dataclasses.replace(v, evidence=refs)
                new.append(v)
            self.verdicts[key] = new
        if changed:
            self._written = None
        return changed

    def to_json(self, verdicts: bool = True) -> dict[str, Any]:
        return {
            "stages_run": self.stages_run,
            "timings_s": self.timings,
            "connections": self.connections,
            **({"interrupted_during": self.interrupted} if self.interrupted else {}),
            **(
                {"verdicts": [v.to_json() for vs in self.verdicts.values() for v in vs]}
                if verdicts
                else {}
            ),
        }

    def write(self, run_dir: Path) -> None:
        """verdicts.json, streamed: one compact verdict per line (grep-able; at 1,024 nodes
        ~270,000 verdicts, which an indented dump took ~30 s of pure-Python encoding and
        several hundred MB to build)."""
        key = (str(run_dir), *self._state_key())
        if key == self._written and (run_dir / VERDICTS_FILE).is_file():
            return  # the file already holds exactly this (run end after the engine's write)
        head = self.to_json(verdicts=False)
        enc = json.JSONEncoder(separators=(",", ":")).encode
        tmp = run_dir / (VERDICTS_FILE + ".tmp")
        with tmp.open("w", encoding="utf-8") as f:
            f.write(enc(head)[:-1] + ',"verdicts":[')
            sep = "\n"
            for vs in self.verdicts.values():
                for v in vs:
                    f.write(sep + enc(v.to_json()))
                    sep = ",\n"
            f.write("\n]}\n")
        tmp.replace(run_dir / VERDICTS_FILE)
        self._written = key

    def _state_key(self) -> tuple[object, ...]:
        """What can change between writes: verdicts are only ever added."""
        n = sum(len(vs) for vs in self.verdicts.values())
        return (n, len(self.stages_run), self.connections, self.interrupted, len(self.timings))

    @classmethod
    def read(cls, run_dir: Path) -> RunResult:
        doc = json.loads((run_dir / VERDICTS_FILE).read_text(encoding="utf-8"))
        r = cls(
            stages_run=list(doc["stages_run"]),
            timings=dict(doc["timings_s"]),
            connections=int(doc.get("connections", 0)),
            interrupted=doc.get("interrupted_during"),
        )
        for d in doc["verdicts"]:
            r.add(Verdict.from_json(d))
        return r
