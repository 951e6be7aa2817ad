"""A run's results as data, and the names of the files a run directory holds.

`RunResult` is every verdict of a run by (check id, node); every layer above the stages reads
it (admission, comparison, reports) and none of them needs the engine that fills it.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodegate.core.errors import ConfigError
from nodegate.core.values import Verdict

# The files of a run directory (`reports/<run-id>/`), named once.
VERDICTS_FILE = "verdicts.jsonl.gz"
# What runs before verdicts.jsonl.gz wrote (one JSON document, a verdict per line): still read.
VERDICTS_JSON_FILE = "verdicts.json"
VERDICTS_FORMAT = "nodegate-verdicts"  # the first line's `format`
VERDICTS_VERSION = 2  # 1: verdicts.json
VERDICTS_GZ_LEVEL = 6  # 256 replayed nodes: 3.1 KB per node (level 3: 3.9), ~0.5 ms per node
ADMISSION_FILE = "admission.json"
REPORT_FILE = "report.html"
JUNIT_FILE = "junit.xml"
ACTIONS_FILE = "actions.json"
PATCHES_FILE = "kubernetes-patches.json"
BASELINE_FILE = "baseline.json"
COMPARE_FILE = "compare.json"
RAW_DIR = "raw"


# A verdict's fields whose equal text values among a run's verdicts are held once
# (`SharedValues`); observed and expected only when they are text.
_SHARED_FIELDS = ("check", "node", "component", "unit", "message", "remediation",
                  "remediation_class", "job", "observed", "expected")  # fmt: skip


class SharedValues:
    """One object for each distinct text among a run's verdicts (and each distinct evidence
    tuple): at 10,000 nodes a run holds ~2.5 M verdicts whose components, messages, observed
    and expected texts repeat across nodes (`observed` "Enabled" on every GPU), and a worker's
    verdicts arrive unpickled, every string a copy of its own; ~200 of a verdict's ~420 bytes.
    A field is only ever replaced by an equal value of the same type (through
    `object.__setattr__`, as the frozen dataclass's own `__init__` sets it), so the verdict
    reads, compares, hashes and is written exactly as before."""

    __slots__ = ("_texts", "_refs")

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}
        self._refs: dict[tuple[str, ...], tuple[str, ...]] = {}

    def share(self, v: Verdict) -> Verdict:
        texts = self._texts
        for name in _SHARED_FIELDS:
            x = getattr(v, name)
            if type(x) is str:  # only text: 1 == 1.0 == True would share across types
                y = texts.setdefault(x, x)
                if y is not x:
                    object.__setattr__(v, name, y)
        if v.evidence:
            refs = self._refs.setdefault(v.evidence, v.evidence)
            if refs is not v.evidence:
                object.__setattr__(v, "evidence", refs)
        return v


@dataclass
class RunResult:
    """Every verdict of a run, by (check id, node)."""

    verdicts: dict[tuple[str, str], list[Verdict]] = field(default_factory=dict)
    stages_run: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    connections: int = 0
    interrupted: str | None = None  # the stage running when the run was interrupted
    _written: tuple[object, ...] | None = field(default=None, repr=False, compare=False)
    _shared: SharedValues = field(default_factory=lambda: SharedValues(), repr=False, compare=False)

    def add(self, v: Verdict) -> None:
        self.verdicts.setdefault((v.check, v.node), []).append(self._shared.share(v))

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
        """verdicts.jsonl.gz, streamed: gzip'd lines, the run's own fields first (`format`,
        `version`, stages, timings, connections), then one compact verdict per line, passes
        included (`zgrep '"status":"fail"' verdicts.jsonl.gz`; at 256 replayed nodes, ~250
        verdicts per node, 3.1 KB per node where the plain verdicts.json took 82 KB). A
        verdicts.json an older run left beside it is removed: one run, one verdicts file."""
        key = (str(run_dir), *self._state_key())
        if key == self._written and (run_dir / VERDICTS_FILE).is_file():
            return  # the file already holds exactly this (run end after the engine's write)
        head = {"format": VERDICTS_FORMAT, "version": VERDICTS_VERSION, **self.to_json(False)}
        enc = json.JSONEncoder(separators=(",", ":")).encode
        tmp = run_dir / (VERDICTS_FILE + ".tmp")
        with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=VERDICTS_GZ_LEVEL) as f:
            f.write(enc(head) + "\n")
            for vs in self.verdicts.values():
                f.writelines(enc(v.to_json()) + "\n" for v in vs)
        tmp.replace(run_dir / VERDICTS_FILE)
        (run_dir / VERDICTS_JSON_FILE).unlink(missing_ok=True)
        self._written = key

    def _state_key(self) -> tuple[object, ...]:
        """What can change between writes: verdicts are only ever added."""
        n = sum(len(vs) for vs in self.verdicts.values())
        return (n, len(self.stages_run), self.connections, self.interrupted, len(self.timings))

    @classmethod
    def read(cls, run_dir: Path) -> RunResult:
        """The run in `run_dir` (verdicts.jsonl.gz, or an older run's verdicts.json);
        ConfigError naming the file when it is missing or not a verdicts file."""
        head, verdicts = read_verdicts(run_dir)
        r = cls(
            stages_run=list(head["stages_run"]),
            timings=dict(head["timings_s"]),
            connections=int(head.get("connections", 0)),
            interrupted=head.get("interrupted_during"),
        )
        for v in verdicts:
            r.add(v)
        return r


def verdicts_path(run_dir: Path) -> Path | None:
    """The run's verdicts file: verdicts.jsonl.gz, else an older run's verdicts.json, else
    None."""
    for name in (VERDICTS_FILE, VERDICTS_JSON_FILE):
        if (run_dir / name).is_file():
            return run_dir / name
    return None


def read_verdicts(run_dir: Path) -> tuple[dict[str, Any], Iterator[Verdict]]:
    """The run's own fields (stages_run, timings_s, connections, interrupted_during) and its
    verdicts, read one line at a time, from either file (`verdicts_path`). ConfigError
    (`<file>: not a verdicts file (...)`) for a missing file, a cut one or a bad line, raised
    by the iterator too, when it reaches the bad line."""
    path = verdicts_path(run_dir)
    if path is None:
        raise ConfigError(f"{run_dir}: no {VERDICTS_FILE} (nor an older run's "
                          f"{VERDICTS_JSON_FILE}): not a finished run directory")  # fmt: skip
    lines = _lines(path)
    try:
        first = next(lines, "")
        if path.name == VERDICTS_JSON_FILE:
            return _read_json(path, first, lines)
        head = json.loads(first)
        if not isinstance(head, dict) or head.get("format") != VERDICTS_FORMAT:
            raise ValueError(f"first line is not {VERDICTS_FORMAT}'s header")
        if head.get("version") != VERDICTS_VERSION:
            raise ValueError(f"version {head.get('version')!r}, this nodegate reads "
                             f"{VERDICTS_VERSION}")  # fmt: skip
        _run_fields(head)
    except (ValueError, KeyError, TypeError, OSError, EOFError) as exc:
        raise _bad(path, exc) from None
    return head, _verdicts(path, lines)


def _lines(path: Path) -> Iterator[str]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        yield from f


def _run_fields(head: dict[str, Any]) -> None:
    """The run's own fields checked (a document without them, one another tool made: none)."""
    head.setdefault("stages_run", [])
    head.setdefault("timings_s", {})
    if not isinstance(head["stages_run"], list) or not isinstance(head["timings_s"], dict):
        raise ValueError("stages_run is not a list or timings_s not an object")


def _verdicts(path: Path, lines: Iterator[str]) -> Iterator[Verdict]:
    n = 1  # the lines read: the head, then a verdict a line
    try:
        for line in lines:
            n += 1
            if line.strip():
                yield Verdict.from_json(json.loads(line))
    except (OSError, EOFError) as exc:  # a file cut short: the line after the last one read
        raise _bad(path, exc, n + 1) from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise _bad(path, exc, n) from None


def _read_json(
    path: Path, first: str, lines: Iterator[str]
) -> tuple[dict[str, Any], Iterator[Verdict]]:
    """verdicts.json (version 1): one document; as written, a verdict per line between the
    head and `]}`, read one at a time; any other layout of it is read whole."""
    if not first.rstrip().endswith('"verdicts":['):
        doc = json.loads(first + "".join(lines))
        if not isinstance(doc, dict) or not isinstance(doc.get("verdicts"), list):
            raise ValueError("no verdicts[]")
        _run_fields(doc)
        return doc, _whole(path, doc["verdicts"])
    head = json.loads(first.rstrip()[: -len(',"verdicts":[')] + "}")
    _run_fields(head)

    def verdicts() -> Iterator[Verdict]:
        n, closed = 1, False
        try:
            for n, line in enumerate(lines, 2):  # noqa: B007 (n: the line a ConfigError names)
                line = line.strip().rstrip(",")
                if line in ("]}", "]"):
                    closed = True
                elif line:
                    yield Verdict.from_json(json.loads(line))
            if not closed:
                raise ValueError("cut short: no closing ]}")
        except (ValueError, KeyError, TypeError, AttributeError, OSError) as exc:
            raise _bad(path, exc, n) from None

    return head, verdicts()


def _whole(path: Path, docs: list[Any]) -> Iterator[Verdict]:
    for n, d in enumerate(docs, 1):
        try:
            yield Verdict.from_json(d)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"{path}: not a verdicts file (verdict {n}: {exc})") from None


def _bad(path: Path, exc: BaseException, line: int | None = None) -> ConfigError:
    where = f"line {line}: " if line else ""
    return ConfigError(f"{path}: not a verdicts file ({where}{exc})")


def read_verdicts_doc(run_dir: Path) -> dict[str, Any]:
    """The run's verdicts as one document, `{stages_run, timings_s, connections, verdicts:
    [dict...]}` (what `RunResult.to_json` gives; report.html and the benches read it)."""
    head, verdicts = read_verdicts(run_dir)
    head = {k: v for k, v in head.items() if k not in ("format", "version", "verdicts")}
    return {**head, "verdicts": [v.to_json() for v in verdicts]}
