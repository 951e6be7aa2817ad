"""junit.xml written by nodegate, one test case per (check, node), streaming (`--items check`).

With one pytest item per check, pytest's junitxml would write one test case per check; CI
dashboards count (check, node). This writer gives each (check, node) the test case pytest's
junitxml writes for that (check, node)'s item in per-node mode: the same classname and name
(`suites.test_reach`, `test_kernel_version[gpu017]`), the same outcome element (`failure`,
`skipped type="pytest.skip"`, `skipped type="pytest.xfail"`, `error`) and the same escaping
(`bin_xml_escape`, ElementTree's serializer). Cases go to `<path>.part` as they come, one
serialized element at a time, so memory does not grow with the fleet (junitparser, like
pytest's junitxml, keeps the whole tree: bench_replay_scale measures both); `close()` writes
the file: the suite's counts first, as pytest's, then the cases.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import shutil
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TextIO

from _pytest import junitxml
from _pytest.junitxml import bin_xml_escape, mangle_test_address

# pytest 9's budget for a failure's message attribute (the element's text keeps it all).
_shorten = getattr(junitxml, "shorten_message", lambda message: message)

# Outcomes, as nodegate.session.collection.judge_item names them, plus "error".
_STATS = {"failed": "failures", "skipped": "skipped", "xfailed": "skipped", "error": "errors"}


def case_names(nodeid: str) -> tuple[str, str]:
    """pytest junitxml's (classname, name) of an item id:
    `suites/test_reach.py::test_kernel_version[gpu017]` -> ('suites.test_reach',
    'test_kernel_version[gpu017]')."""
    names = mangle_test_address(nodeid)
    return ".".join(names[:-1]), bin_xml_escape(names[-1])


class JunitStream:
    """A junit.xml written case by case (`case`), finished by `close`."""

    def __init__(self, path: Path, suite_name: str = "pytest") -> None:
        self.path = path
        self.suite_name = suite_name
        self.part = path.with_name(path.name + ".part")
        self.stats = dict.fromkeys(("tests", "failures", "skipped", "errors"), 0)
        self.started = time.time()
        self._out: TextIO | None = None
        self.closed = False

    def case(
        self,
        classname: str,
        name: str,
        outcome: str,
        message: str = "",
        text: str = "",
        seconds: float = 0.0,
    ) -> None:
        """One test case: `outcome` passed, failed, skipped, xfailed or error; `message` and
        `text` the failure or skip text (the element's message attribute and its body)."""
        el = ET.Element("testcase", classname=classname, name=name, time=f"{seconds:.3f}")
        if outcome == "failed":
            sub = ET.SubElement(el, "failure", message=bin_xml_escape(_shorten(message)))
            sub.text = bin_xml_escape(text)
        elif outcome == "error":
            sub = ET.SubElement(el, "error", message=bin_xml_escape(_shorten(message)))
            sub.text = bin_xml_escape(text)
        elif outcome == "skipped":
            sub = ET.SubElement(el, "skipped", type="pytest.skip", message=bin_xml_escape(message))
            sub.text = bin_xml_escape(text)
        elif outcome == "xfailed":
            ET.SubElement(el, "skipped", type="pytest.xfail", message=bin_xml_escape(message))
        self.stats["tests"] += 1
        if outcome in _STATS:
            self.stats[_STATS[outcome]] += 1
        self._file().write(ET.tostring(el, encoding="unicode"))

    def _file(self) -> TextIO:
        if self._out is None:
            self.part.parent.mkdir(parents=True, exist_ok=True)
            self._out = open(self.part, "w", encoding="utf-8")  # noqa: SIM115 (closed in close)
        return self._out

    def close(self) -> None:
        """Write `path`: the suite's counts, then every case (copied from the part file)."""
        if self.closed:
            return
        self.closed = True
        self._file().close()
        suite = ET.Element(
            "testsuite",
            name=self.suite_name,
            errors=str(self.stats["errors"]),
            failures=str(self.stats["failures"]),
            skipped=str(self.stats["skipped"]),
            tests=str(self.stats["tests"]),
            time=f"{time.time() - self.started:.3f}",
            timestamp=dt.datetime.fromtimestamp(self.started, dt.timezone.utc)
            .astimezone()
            .isoformat(),
            hostname=platform.node(),
        )
        suite.text = "\0"  # where the cases go
        head, _, tail = ET.tostring(suite, encoding="unicode").partition("\0")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "w", encoding="utf-8") as out:
            out.write('<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests">')
            out.write(head)
            with open(self.part, encoding="utf-8") as body:
                shutil.copyfileobj(body, out, 1 << 20)
            out.write(tail + "</testsuites>")
        os.unlink(self.part)
