"""nodegate's junit.xml writer (`--items check`): pytest junitxml's elements and counts, written
case by case, node text escaped as pytest escapes it."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from nodegate.reports.junit import JunitStream, case_names


def test_cases_stream_to_a_part_file_and_close_writes_the_counts_first(tmp_path: Path) -> None:
    path = tmp_path / "run" / "junit.xml"
    out = JunitStream(path)
    classname, name = case_names("suites/test_reach.py::test_kernel_version[gpu017]")
    assert (classname, name) == ("suites.test_reach", "test_kernel_version[gpu017]")
    out.case(classname, name, "failed", "Failed: FAIL\x1b[31m x", "FAIL\x1b[31m x\n  two")
    out.case(classname, "t[b]", "passed")
    out.case(classname, "t[c]", "skipped", "off", "suites/test_reach.py:1: off")
    out.case(classname, "t[d]", "xfailed", "waived")
    out.case(classname, "t[e]", "error", 'failed on setup with "not run: x"', "not run: x")
    assert out.part.exists() and not path.exists()
    out.close()
    assert not out.part.exists()
    text = path.read_text()
    assert text.startswith('<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests">')
    suite = ET.fromstring(text.split("?>", 1)[1])[0]
    assert {k: suite.attrib[k] for k in ("name", "tests", "failures", "skipped", "errors")} == {
        "name": "pytest", "tests": "5", "failures": "1", "skipped": "2", "errors": "1"
    }  # fmt: skip
    got = [
        (c.attrib["name"], [(e.tag, e.attrib.get("type"), e.attrib["message"], e.text) for e in c])
        for c in suite
    ]
    assert got == [
        ("test_kernel_version[gpu017]",
         [("failure", None, "Failed: FAIL#x1B[31m x", "FAIL#x1B[31m x\n  two")]),
        ("t[b]", []),
        ("t[c]", [("skipped", "pytest.skip", "off", "suites/test_reach.py:1: off")]),
        ("t[d]", [("skipped", "pytest.xfail", "waived", None)]),
        ("t[e]", [("error", None, 'failed on setup with "not run: x"', "not run: x")]),
    ]  # fmt: skip
