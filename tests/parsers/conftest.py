"""Shared helpers for parser tests: corpus fixtures and whole-structure expected JSON."""

from __future__ import annotations

import dataclasses
import enum
import json
import os
from pathlib import Path
from typing import Any

import pytest

CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "corpus"
EXPECTED = Path(__file__).resolve().parent.parent / "fixtures" / "expected"


def to_jsonable(obj: Any) -> Any:
    """Facts (frozen dataclasses, tuples, enums) -> plain JSON types."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    return obj


def corpus_text(rel: str) -> str:
    return (CORPUS / rel).read_text(encoding="utf-8", errors="replace")


def check_expected(parser_name: str, fixture: str, facts: Any) -> None:
    """Compare the whole parsed structure against tests/fixtures/expected/<parser>/<fixture>.json.

    With NODEGATE_REGEN_EXPECTED=1 the expected file is (re)written instead; review the diff.
    """
    got = to_jsonable(facts)
    path = EXPECTED / parser_name / (Path(fixture).name + ".json")
    if os.environ.get("NODEGATE_REGEN_EXPECTED") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        pytest.skip(f"regenerated {path.relative_to(EXPECTED)}: review the diff, then rerun")
    assert path.exists(), f"no expected facts at {path} (NODEGATE_REGEN_EXPECTED=1)"
    want = json.loads(path.read_text(encoding="utf-8"))
    assert got == want


def cut_corpus(rel: str, at_line_end: bool = False) -> str:
    """The first ~40% of a corpus file (a truncated capture); at_line_end: cut after a line."""
    text = corpus_text(rel)
    cut = len(text) * 2 // 5
    return text[: text.rindex("\n", 0, cut) + 1] if at_line_end else text[:cut]
