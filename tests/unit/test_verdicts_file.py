"""verdicts.jsonl.gz: gzip'd lines (the run's fields, then a verdict a line, as zgrep reads
them), read back to the same RunResult; an older run's verdicts.json still read; a missing,
cut or foreign file named with the line it broke at."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from nodegate.core.errors import ConfigError
from nodegate.core.results import RunResult, read_verdicts_doc
from nodegate.core.thresholds import Threshold
from nodegate.core.values import SAID, Status, Verdict

from tests.history_runs import write_verdicts_v1

BW = Threshold("min", 360.0, "Gb/s")


def result() -> RunResult:
    r = RunResult(
        stages_run=["reach", "ib_pairs"], timings={"reach": 0.5, "ib_pairs": 3.25}, connections=4
    )
    r.add(Verdict("reach.ssh", "gpu001", Status.PASS, "ssh", "ok", "ok", message="ran 4 of 4"))
    r.add(Verdict("ib_pairs.rail.bandwidth", "gpu001", Status.PASS, "mlx5_0 port 1 (rail 0)",
                  392.5, ">= 360", "Gb/s", evidence=("raw/gpu001/ib_pairs.json#r1-rail0",),
                  reference=BW))  # fmt: skip
    r.add(Verdict("ib_pairs.rail.bandwidth", "gpu002", Status.FAIL, "mlx5_0 port 1 (rail 0)",
                  350.0, ">= 360", "Gb/s", "below the line rate", "reseat the cable",
                  ("raw/gpu002/ib_pairs.json#r1-rail0",), "reseat", BW))  # fmt: skip
    r.add(Verdict("nccl.whole.busbw", "gpu002", Status.PASS, "all_reduce", 180.0, job="gpu[1-2]"))
    return r


def lines(path: Path) -> list[str]:
    return gzip.decompress(path.read_bytes()).decode().splitlines()


def test_written_as_gzip_lines_a_verdict_each_and_read_back_the_same(tmp_path: Path) -> None:
    r = result()
    (tmp_path / "verdicts.json").write_text("{}")  # an older verdicts file in the same place
    r.write(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["verdicts.jsonl.gz"]
    got = lines(tmp_path / "verdicts.jsonl.gz")
    assert got[0] == (
        '{"format":"nodegate-verdicts","version":2,"stages_run":["reach","ib_pairs"],'
        '"timings_s":{"reach":0.5,"ib_pairs":3.25},"connections":4}'
    )
    assert got[1:] == [
        json.dumps(v.to_json(), separators=(",", ":")) for vs in r.verdicts.values() for v in vs
    ]
    fails = [json.loads(ln)["node"] for ln in got if '"status":"fail"' in ln]  # zgrep's view
    assert fails == ["gpu002"]
    assert RunResult.read(tmp_path) == r
    assert read_verdicts_doc(tmp_path) == r.to_json()


def test_an_interrupted_run_keeps_the_stage_it_stopped_in(tmp_path: Path) -> None:
    r = RunResult(stages_run=["reach"], timings={"reach": 1.0}, interrupted="pcie_gpu")
    r.write(tmp_path)
    back = RunResult.read(tmp_path)
    assert (back.interrupted, back.verdicts, back.stages_run) == ("pcie_gpu", {}, ["reach"])


def test_a_run_directory_written_before_reads_the_same(tmp_path: Path) -> None:
    r = result()
    write_verdicts_v1(r, tmp_path)
    assert RunResult.read(tmp_path) == r
    assert read_verdicts_doc(tmp_path) == r.to_json()
    # any other layout of the same document (indented, by another tool) is read whole
    (tmp_path / "verdicts.json").write_text(json.dumps(r.to_json(), indent=2))
    assert RunResult.read(tmp_path) == r


def test_a_missing_cut_or_foreign_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        RunResult.read(tmp_path)
    assert str(e.value) == (
        f"{tmp_path}: no verdicts.jsonl.gz (nor an older run's verdicts.json): "
        "not a finished run directory"
    )
    path = tmp_path / "verdicts.jsonl.gz"
    path.write_bytes(gzip.compress(b"check,node,status\n"))
    with pytest.raises(ConfigError) as e:
        RunResult.read(tmp_path)
    assert str(e.value).startswith(f"{path}: not a verdicts file (Expecting value: line 1")
    path.write_bytes(gzip.compress(b'{"format":"nodegate-verdicts","version":3}\n'))
    with pytest.raises(ConfigError) as e:
        RunResult.read(tmp_path)
    assert str(e.value) == f"{path}: not a verdicts file (version 3, this nodegate reads 2)"
    path.write_bytes(b'{"stages_run": []}')  # not gzip at all
    with pytest.raises(ConfigError) as e:
        RunResult.read(tmp_path)
    assert str(e.value) == f"{path}: not a verdicts file (Not a gzipped file (b'{{\"'))"
    result().write(tmp_path)
    good = lines(path)
    path.write_bytes(gzip.compress("\n".join([*good[:3], '{"check": "x"}', good[3]]).encode()))
    with pytest.raises(ConfigError) as e:
        RunResult.read(tmp_path)
    assert str(e.value) == f"{path}: not a verdicts file (line 4: 'node')"
    path.unlink()
    old = write_verdicts_v1(result(), tmp_path)
    old.write_text(old.read_text().removesuffix("]}\n"))  # a copy cut short
    with pytest.raises(ConfigError) as e:
        RunResult.read(tmp_path)
    assert str(e.value) == f"{old}: not a verdicts file (line 5: cut short: no closing ]}})"


def test_a_run_holds_each_distinct_text_once_and_every_verdict_reads_the_same() -> None:
    """Two nodes' verdicts made apart (as a --jobs worker's arrive, each string its own copy):
    held, their equal texts and evidence tuples are one object each; the verdicts compare
    equal to what was added, and a number is never shared with an equal text or bool."""

    def made(node: str, observed: object) -> Verdict:
        return Verdict("".join(["gpu.", "ecc"]), node, Status.PASS, "".join(["GPU", "0"]),
                       observed, "".join(["Ena", "bled"]), message="".join(["ecc ", "on"]),
                       evidence=tuple(["".join(["raw/x.json", "#q"])]))  # fmt: skip

    made_apart = [made("gpu001", "".join(["Ena", "bled"])), made("gpu002", 1),
                  made("gpu003", True), made("gpu004", "1")]  # fmt: skip
    copies = [Verdict.from_json(v.to_json()) for v in made_apart]
    r = RunResult()
    for v in copies:
        r.add(v)
    held = [v for vs in r.verdicts.values() for v in vs]
    assert held == made_apart
    for name in ("check", "component", "expected", "message", "evidence"):
        assert len({id(getattr(v, name)) for v in held}) == 1, name
    assert held[0].observed is held[0].expected
    assert [(type(v.observed), v.observed) for v in held] == [
        (str, "Enabled"), (int, 1), (bool, True), (str, "1")]  # fmt: skip


def test_a_verdict_line_names_its_fields_in_one_order() -> None:
    """check, node, status, what it says (`SAID`), evidence, then reference and job when set."""
    full = Verdict("c", "n", Status.FAIL, "GPU0", 1.5, ">= 2", "x", "low", remediation="fix",
                   evidence=("raw/n/s.json#q",), remediation_class="rma", reference=BW,
                   job="n[1-2]")  # fmt: skip
    assert list(full.to_json()) == [
        "check",
        "node",
        "status",
        *SAID,
        "evidence",
        "reference",
        "job",
    ]
    assert list(Verdict("c", "n", Status.PASS).to_json()) == [
        "check",
        "node",
        "status",
        *SAID,
        "evidence",
    ]
    assert Verdict.from_json(full.to_json()) == full
