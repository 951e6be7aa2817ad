"""Benchmark: junit.xml of N nodes x 59 checks, nodegate's streaming writer vs junitparser.

    .venv/bin/python bench/bench_junit.py                # 1024,5000,10000 nodes
    .venv/bin/python bench/bench_junit.py --sizes 10000

Each writer runs in a child process (its own peak RSS): `JunitStream` (nodegate.reports.junit,
what `--items check` writes) and junitparser's `JUnitXml` (a tree in memory, written at the
end). Every 50th case is a failure with a 300-character text, every 20th skipped, as a fleet
with faults; the table: wall, CPU, the child's peak RSS, the file's size.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import print_table  # noqa: E402

CHECKS = 59
TEXT = "FAIL hca.firmware.version n [mlx5_2 (rail 2)]\n  observed: 28.37.1014 " + "x" * 240


def cases(n: int):  # type: ignore[no-untyped-def]
    for c in range(CHECKS):
        for i in range(n):
            k = c * n + i
            outcome = "failed" if k % 50 == 0 else "skipped" if k % 20 == 0 else "passed"
            yield f"suites.test_s{c % 9}", f"test_check_{c}[node{i:05d}]", outcome


def write_stream(n: int, path: Path) -> None:
    from nodegate.reports.junit import JunitStream

    out = JunitStream(path)
    for classname, name, outcome in cases(n):
        text = TEXT if outcome != "passed" else ""
        out.case(classname, name, outcome, text, text)
    out.close()


def write_junitparser(n: int, path: Path) -> None:
    import junitparser

    suite = junitparser.TestSuite("pytest")
    # add_testcases once: add_testcase recounts every case of the suite on each call
    # (quadratic: 60,416 cases took over 4.5 min of CPU here).
    batch = []
    for classname, name, outcome in cases(n):
        case = junitparser.TestCase(name, classname, 0.0)
        if outcome == "failed":
            case.result = [junitparser.Failure(TEXT)]
        elif outcome == "skipped":
            case.result = [junitparser.Skipped(TEXT)]
        batch.append(case)
    suite.add_testcases(batch)
    xml = junitparser.JUnitXml()
    xml.add_testsuite(suite)
    xml.write(str(path))


def child(writer: str, n: int, path: str) -> None:
    {"stream": write_stream, "junitparser": write_junitparser}[writer](n, Path(path))
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)  # this child's own peak, KiB


def measure(writer: str, n: int, tmp: Path) -> dict[str, object]:
    path = tmp / f"{writer}-{n}.xml"
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    code = f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import bench_junit; "
    code += f"bench_junit.child({writer!r}, {n}, {str(path)!r})"
    p = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "writer": writer,
        "nodes": n,
        "cases": n * CHECKS,
        "wall_s": round(wall, 1),
        "cpu_s": round(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime, 1),
        "peak_rss_mb": round(int(p.stdout.split()[-1]) / 1024),
        "file_mb": round(path.stat().st_size / 1e6, 1),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1024,5000,10000")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="ngjunit-") as tmp:
        for writer in ("stream", "junitparser"):
            rows += [measure(writer, int(s), Path(tmp)) for s in a.sizes.split(",")]
    print_table(f"junit.xml of N nodes x {CHECKS} checks", rows, 12)
    return 0


if __name__ == "__main__":
    sys.exit(main())
