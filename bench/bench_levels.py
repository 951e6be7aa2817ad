"""Benchmark: the demo at each --level, back to back (run on demand, not a test).

    .venv/bin/python bench/bench_levels.py                       # standard, quick x 2
    .venv/bin/python bench/bench_levels.py --levels quick,standard,extended --repeat 1

Runs `nodegate demo -- --level L` (its own simulated fleet each time, built and stopped as the
demo does) for each level in turn, `--repeat` times, alternating so that a level's runs see the
same machine load as the other's, and prints per run: pytest's own seconds, each stage's
seconds (`timings_s` of verdicts.jsonl.gz), the machine's load average before and after, and
the admitted and rejected counts; then per level the mean, and quick's share of standard's
(mean of the pairs, each quick run against the standard run beside it). It checks that every
run of every level admits the same nodes and says so (a difference is printed, not hidden).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from nodegate.core.results import read_verdicts_doc

STAGES = ("reach", "pcie_gpu", "gpu_load", "hca", "fabric", "ib_pairs", "traffic", "nccl")
_PYTEST_S = re.compile(r" in ([0-9.]+)s")


def run_level(level: str, subnet: str, k: int) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix=f"nglevels-{level}-"))
    try:
        load0 = os.getloadavg()[0]
        nodegate = Path(sys.executable).parent / "nodegate"
        p = subprocess.run(
            [str(nodegate), "demo", "--subnet", subnet, "--dir", str(tmp / "fleet"), "--",
             "--level", level, f"--run-id={level}-{k}"],
            cwd=tmp, capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
        load1 = os.getloadavg()[0]
        run = tmp / "reports" / f"{level}-{k}"
        if not (run / "admission.json").is_file():
            sys.stderr.write(p.stdout[-3000:] + p.stderr[-3000:])
            raise SystemExit(f"{level}: the demo wrote no admission.json (exit {p.returncode})")
        adm = json.loads((run / "admission.json").read_text())
        timings = read_verdicts_doc(run).get("timings_s", {})
        # pytest's summary line: "39 failed, 1951 passed, 1082 skipped in 105.65s"
        secs = [float(m.group(1)) for ln in p.stdout.splitlines() if " passed" in ln
                for m in _PYTEST_S.finditer(ln)]  # fmt: skip
        nodes = adm["nodes"]
        return {
            "level": adm["level"],
            "pytest_s": secs[-1] if secs else None,
            **{s: round(float(timings.get(s, 0.0)), 1) for s in STAGES},
            "load": f"{load0:.1f}->{load1:.1f}",
            "admitted": sorted(n for n, d in nodes.items() if d["state"] == "admitted"),
            "rejected": sorted(n for n, d in nodes.items() if d["state"] == "rejected"),
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--levels", default="standard,quick")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--subnet", default="127.93", help="the fleets' loopback /16 (127.N)")
    a = ap.parse_args()
    levels = a.levels.split(",")
    rows = [run_level(lv, a.subnet, k) for k in range(a.repeat) for lv in levels]
    cols = ["level", "pytest_s", *STAGES, "load"]
    print(" | ".join(f"{c:>9}" for c in cols) + " | admitted | rejected")
    for r in rows:
        cells = [str(r[c]) for c in cols]
        print(
            " | ".join(f"{c:>9}" for c in cells) + f" | {len(r['admitted'])} | {len(r['rejected'])}"
        )
    for lv in levels:
        got = [float(r["pytest_s"]) for r in rows if r["level"] == lv and r["pytest_s"]]
        if got:
            print(f"{lv}: mean {sum(got) / len(got):.1f} s over {len(got)} run(s)")
    pairs = [  # (quick, standard) of each two runs side by side, in run order
        (float(a["pytest_s"]), float(b["pytest_s"]))
        if a["level"] == "quick"
        else (float(b["pytest_s"]), float(a["pytest_s"]))
        for a, b in zip(rows, rows[1:], strict=False)
        if {a["level"], b["level"]} == {"quick", "standard"} and a["pytest_s"] and b["pytest_s"]
    ]
    if pairs:
        shares = [q / s for q, s in pairs]
        print("quick / standard, run beside run: " + ", ".join(f"{x:.2f}" for x in shares)
              + f"; mean {sum(shares) / len(shares):.2f}")  # fmt: skip
    sets = {(tuple(r["admitted"]), tuple(r["rejected"])) for r in rows}
    if len(sets) == 1:
        adm, rej = next(iter(sets))
        print(f"every run: the same {len(adm)} admitted, {len(rej)} rejected")
    else:
        print("runs differ in what they admit:")
        for r in rows:
            print(f"  {r['level']}: admitted {','.join(r['admitted'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
