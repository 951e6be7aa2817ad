"""Benchmark: a whole passive run through pytest over simulated fleets (run on demand).

    .venv/bin/python bench/bench_scale.py                      # 1024 nodes
    .venv/bin/python bench/bench_scale.py --sizes 1024,5000
    .venv/bin/python bench/bench_scale.py --sizes 1024 --profile /tmp/p1024.prof
    .venv/bin/python bench/bench_scale.py --sizes 64,256 --transport ssh,slurm
    .venv/bin/python bench/bench_scale.py --sizes 256 --py-spy /tmp/spy.txt   # pip install .[bench]

Starts a healthy simulated fleet of each size (the demo's hardware, no faults), then runs
`pytest suites -m "reach or pcie_gpu or hca or roce"` in a child process, as an operator runs
it, and prints a table: wall time, the controller's CPU (user+sys of the pytest process) in
total and per node, the controller's peak RSS, the machine's CPU spent outside the controller
in the same interval (the simulated side: sshd, the node scripts; or slurmd/slurmstepd),
evidence on disk per node, verdicts.json size, pytest items, and the items' own time
(collection + the per-item protocol, from pytest's own durations). With --profile the child
runs under cProfile and the top entries by own time are printed.
"""

from __future__ import annotations

import argparse
import os
import pstats
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from nodegate.core.results import VERDICTS_FILE, read_verdicts_doc

REPO = Path(__file__).resolve().parents[1]
PASSIVE = "reach or pcie_gpu or hca or roce"


def model(n: int) -> dict[str, object]:
    doc = yaml.safe_load((REPO / "inventories" / "sim" / "demo.yaml").read_text())
    doc.pop("overrides", None)
    doc.pop("faults", None)
    doc["name"] = f"scale{n}"
    doc["nodes"] = f"node[{1:05d}-{n:05d}]"
    return doc


def machine_busy_s() -> float:
    """CPU seconds the whole machine spent busy (all cores), from /proc/stat."""
    f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = f[3] + f[4]
    return (sum(f[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def run_size(n: int, a: argparse.Namespace, transport: str) -> dict[str, object]:
    from nodegate.sim.fleet import build_fleet
    from nodegate.sim.slurm import SlurmCluster

    tmp = Path(tempfile.mkdtemp(prefix=f"ngscale-{n}-"))
    (tmp / "model.yaml").write_text(yaml.safe_dump(model(n)))
    t_build = time.perf_counter()
    fleet = build_fleet(tmp / "model.yaml", tmp / "fleet", subnet=a.subnet)
    slurm = None
    env = dict(os.environ)
    try:
        fleet.start(timeout_s=300)
        build_s = time.perf_counter() - t_build
        if transport == "slurm":
            slurm = SlurmCluster(fleet.root)
            slurm.start()
            env.update(slurm.env())
        reports = tmp / "reports"
        cmd = [sys.executable]
        if a.py_spy:
            spy = str(Path(sys.executable).parent / "py-spy")
            cmd = [spy, "record", "-r", "200", "-f", "raw", "-o", a.py_spy, "--", *cmd]
        if a.profile:
            cmd += ["-m", "cProfile", "-o", a.profile]
        cmd += [
            "-m",
            "pytest",
            str(REPO / "suites"),
            f"--inventory={fleet.root / 'inventory.yaml'}",
            f"--reports-dir={reports}",
            "--run-id=bench",
            "-p",
            "no:cacheprovider",
            "-q",
            f"--rootdir={REPO}",
            "-m",
            PASSIVE,
            *(["--transport", transport] if transport != "ssh" else []),
            *a.extra,
        ]
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        busy0 = machine_busy_s()
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, env=env, timeout=3600)
        wall = time.perf_counter() - t0
        busy = machine_busy_s() - busy0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        run_dir = reports / "bench"
        if p.returncode not in (0, 6):  # 6: a -m run qualifies nobody; anything else is wrong
            sys.stderr.write(p.stdout[-4000:] + p.stderr[-4000:])
            raise SystemExit(f"{n} nodes: pytest exited {p.returncode}")
        verdicts = run_dir / VERDICTS_FILE
        doc = read_verdicts_doc(run_dir)
        non_pass = sum(
            1 for v in doc.get("verdicts", []) if isinstance(v, dict) and v.get("status") != "pass"
        )
        items = next(
            (ln.split()[0] for ln in p.stdout.splitlines() if " passed" in ln and " in " in ln),
            "?",
        )
        row: dict[str, object] = {
            "nodes": n,
            "transport": transport,
            "wall_s": round(wall, 1),
            "ctl_cpu_s": round(cpu, 1),
            "ms_per_node": round(cpu / n * 1000, 1),
            "peak_rss_mb": round(r1.ru_maxrss / 1024, 0),
            "sim_cpu_s": round(busy - cpu, 1),
            "evid_kb_node": round(du(run_dir / "raw") / n / 1024, 1),
            "verdicts_mb": round(verdicts.stat().st_size / 1e6, 1),
            "non_pass": non_pass,
            "passed_items": items,
            "fleet_up_s": round(build_s, 1),
        }
        if a.keep:
            dest = Path(a.keep) / f"{n}-{transport}"
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(run_dir, dest, symlinks=True)
        return row
    finally:
        if slurm is not None:
            slurm.stop()
        fleet.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def print_py_spy(path: str, top: int) -> None:
    """py-spy's collapsed stacks (every thread, samples while running): own samples per
    function, and the share under a few frames that say what the controller was doing."""
    own: dict[str, int] = {}
    under: dict[str, int] = {}
    marks = {
        "parse+judge": "NodeJudge.add",
        "ssh (asyncssh)": "asyncssh/",
        "evidence write": "evidence.py:record",
        "pytest items": "pytest_runtestloop",
        "collection": "pytest_collectstart",
        "verdicts file": "results.py:write",
        "admission+reports": "pytest_sessionfinish",
    }
    total = 0
    for line in Path(path).read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        count = int(n)
        total += count
        frames = stack.split(";")
        leaf = frames[-1]
        own[leaf] = own.get(leaf, 0) + count
        for label, needle in marks.items():
            if any(needle in f for f in frames):
                under[label] = under.get(label, 0) + count
    print(f"py-spy: {total} samples")
    for label, count in sorted(under.items(), key=lambda kv: -kv[1]):
        print(f"  {count / total:6.1%}  under {label}")
    for leaf, count in sorted(own.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {count / total:6.1%}  {leaf}")


def print_table(title: str, rows: list[dict[str, object]], width: int) -> None:
    """The bench's table: a title line, the columns of the first row, a line per row."""
    cols = list(rows[0])
    print(title)
    print(" | ".join(f"{c:>{width}}" for c in cols))
    for r in rows:
        print(" | ".join(f"{str(r[c]):>{width}}" for c in cols))


def print_profile(path: str, top: int) -> None:
    st = pstats.Stats(path)
    st.sort_stats("tottime").print_stats(top)
    st.sort_stats("cumulative").print_stats(top)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1024")
    ap.add_argument("--transport", default="ssh", help="ssh, slurm or ssh,slurm")
    ap.add_argument("--subnet", default="127.91")
    ap.add_argument("--profile", help="write the controller's cProfile here and print its top")
    ap.add_argument("--py-spy", help="sample every thread with py-spy (raw stacks to this file)")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--keep", help="copy each run directory under this directory")
    ap.add_argument("extra", nargs="*", help="more pytest arguments (after --)")
    a = ap.parse_args()
    rows = [run_size(int(s), a, t) for s in a.sizes.split(",") for t in a.transport.split(",")]
    print_table(f"passive stages ({PASSIVE}) through pytest, {os.cpu_count()} cores", rows, 12)
    if a.profile:
        print_profile(a.profile, a.top)
    if a.py_spy:
        print_py_spy(a.py_spy, a.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
