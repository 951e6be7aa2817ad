"""Benchmark: the controller alone at 1,024 to 10,000 nodes, replayed (run on demand).

    .venv/bin/python bench/bench_replay_scale.py                          # 1024,5000,10000
    .venv/bin/python bench/bench_replay_scale.py --sizes 1024 --profile /tmp/r1024.prof
    .venv/bin/python bench/bench_replay_scale.py --sizes 10000 -- -n 2    # pytest-xdist

No sshd and no simulated node while it measures: a real run of the demo's simulated fleet
(32 nodes with its injected faults, the passive stages `reach or pcie_gpu or hca or roce`
over real SSH) is captured once as a bundle; that bundle is replicated to N nodes
(`node00001`..: every evidence file of seed node `i % 32`, its name replaced, its GPU serials
and HCA GUIDs shifted per replica so no two nodes report the same hardware, the verdicts
therefore as varied as the demo's); then `pytest suites --transport replay` runs the same
stages over it in a child process. The table: wall, the controller's CPU (user+sys of the
pytest process, its children included: `--jobs` workers) in total and per node, the pytest
process's own CPU (sampled from /proc: the workers left out), its peak RSS, pytest items,
the run directory per node, the verdicts file's size and the run directory per node by file
(evidence by kind: the rejected nodes' plain `.json`, `.json.gz`, `.html` pages). With
--profile the child runs under cProfile (its main thread: the stages run in another) and the
top entries by own time are printed; --loop-profile profiles the thread that runs the stages
(`bench/_memtrace.py`). With --tracemalloc the child traces its allocations
(`bench/_memtrace.py`: a snapshot near the traced peak, its largest sites printed; it runs 2-3x
slower, so read time and RSS from a run without it). Every run samples the pytest process's
RSS (`rss_peak_at`: when, in seconds from its start, and `rss_timeline_mb`: ten samples).

    .venv/bin/python bench/bench_replay_scale.py --sizes 1024 -- --jobs 1   # in process
    .venv/bin/python bench/bench_replay_scale.py --sizes 1024 -- --jobs 2   # two workers
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import PASSIVE, REPO, du, print_profile, print_table  # noqa: E402
from bench_scale import model as healthy_model  # noqa: E402
from nodegate.core.results import VERDICTS_FILE, read_verdicts_doc  # noqa: E402

SEED_NODES = 32
_SERIAL = re.compile(r"\b(1650\d{9})\b")  # the demo model's GPU serials (13 digits)
_GUID = re.compile(r"\b([0-9a-f]{4}):([0-9a-f]{4}):([0-9a-f]{4}):([0-9a-f]{4})\b")


def pytest_cmd(
    inventory: Path, reports: Path, run_id: str, *extra: str, profile: str | None = None
) -> list[str]:
    """`pytest suites -m PASSIVE` as an operator runs it, under cProfile when `profile`."""
    cmd = [sys.executable, *(["-m", "cProfile", "-o", profile] if profile else [])]
    return [
        *cmd, "-m", "pytest", str(REPO / "suites"), f"--inventory={inventory}",
        f"--reports-dir={reports}", f"--run-id={run_id}", "-p", "no:cacheprovider", "-q",
        f"--rootdir={REPO}", "-m", PASSIVE, *extra,
    ]  # fmt: skip


def capture_seed(a: argparse.Namespace, tmp: Path) -> Path:
    """The demo fleet's passive stages over real SSH; returns the run directory (a bundle)."""
    from nodegate.sim.fleet import build_fleet

    model = REPO / "inventories" / "sim" / "demo.yaml"
    if a.healthy:  # the demo's hardware without its faults
        model = tmp / "healthy.yaml"
        model.write_text(yaml.safe_dump(dict(healthy_model(SEED_NODES), name="demo")))
    fleet = build_fleet(model, tmp / "fleet", subnet=a.subnet)
    try:
        fleet.start(timeout_s=300)
        reports = tmp / "seed-reports"
        cmd = pytest_cmd(fleet.root / "inventory.yaml", reports, "seed")
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, timeout=1800)
        if p.returncode not in (1, 6):  # the demo's faults reject nodes; -m qualifies nobody
            sys.stderr.write(p.stdout[-4000:] + p.stderr[-4000:])
            raise SystemExit(f"seed run: pytest exited {p.returncode}")
        return reports / "seed"
    finally:
        fleet.stop()


def _shift(text: str, old: str, new: str, k: int) -> str:
    text = text.replace(old, new)
    if k == 0:
        return text
    text = _SERIAL.sub(lambda m: str(int(m.group(1)) + k * 1000), text)
    return _GUID.sub(
        lambda m: (
            ":".join(m.groups()[:2]) + f":{(int(m.group(3), 16) + k) % 0x10000:04x}:" + m.group(4)
        ),
        text,
    )


def replicate(seed: Path, n: int, dest: Path) -> tuple[Path, Path]:
    """A bundle of `n` nodes from the seed run's evidence and an inventory naming them."""
    seeds = sorted(p.name for p in (seed / "raw").iterdir() if p.is_dir())
    if len(seeds) != SEED_NODES:
        raise SystemExit(f"seed bundle {seed}: {len(seeds)} nodes, expected {SEED_NODES}")
    files = {s: sorted((seed / "raw" / s).iterdir()) for s in seeds}
    texts = {
        f: (gzip.decompress(f.read_bytes()) if f.suffix == ".gz" else f.read_bytes()).decode()
        for fs in files.values()
        for f in fs
    }
    bundle = dest / "bundle"
    names = [f"node{i + 1:05d}" for i in range(n)]
    for i, name in enumerate(names):
        src = seeds[i % SEED_NODES]
        out = bundle / "raw" / name
        out.mkdir(parents=True)
        for f in files[src]:
            body = _shift(texts[f], src, name, i // SEED_NODES).encode()
            (out / f.name).write_bytes(gzip.compress(body, 1) if f.suffix == ".gz" else body)
    seed_inv = (
        yaml.safe_load((seed / "inventory.yaml").read_text())
        if (seed / "inventory.yaml").exists()
        else {}
    )
    profile = (seed_inv.get("defaults") or {}).get("profile", "generic-hgx-h100")
    inv = {
        "version": 1,
        "defaults": {"profile": profile},
        "nodes": {
            name: {"data_plane": {"address": f"127.{90 + i // 65536}.{i // 256 % 256}.{i % 256}"}}
            for i, name in enumerate(names)
        },
    }
    inventory = dest / "inventory.yaml"
    inventory.write_text(yaml.safe_dump(inv, sort_keys=False))
    return bundle, inventory


def files_kb_node(run_dir: Path, n: int) -> dict[str, float]:
    """The run directory per node, by file (the evidence by kind: plain `.json` of the
    rejected nodes, `.json.gz`, `.html` pages), KB per node, largest first."""
    sizes: dict[str, int] = {}
    for p in run_dir.rglob("*"):
        if p.is_file():
            rel = p.relative_to(run_dir)
            if rel.parts[0] == "raw":
                key = "raw/*" + "".join(p.suffixes[-2 if p.suffix == ".gz" else -1 :])
            else:
                key = rel.parts[0]
            sizes[key] = sizes.get(key, 0) + p.stat().st_size
    return {k: round(v / n / 1024, 1) for k, v in sorted(sizes.items(), key=lambda kv: -kv[1])}


def run_watched(
    cmd: list[str], cwd: Path, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], float, list[tuple[float, int]]]:
    """Run `cmd`; its result, the CPU seconds of that process alone (not its children:
    `--jobs` workers) and its RSS in KB over time ((seconds, KB) pairs), sampled from /proc
    every 0.1 s until it exits."""
    tick = os.sysconf("SC_CLK_TCK")
    own = 0.0
    rss: list[tuple[float, int]] = []
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, cwd=cwd, env=env)
        while proc.poll() is None:
            try:
                f = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
                own = (int(f[11]) + int(f[12])) / tick  # utime, stime
                rss.append((time.perf_counter() - t0, int(f[21]) * _PAGE_KB))
            except (OSError, IndexError, ValueError):
                pass
            time.sleep(0.1)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(cmd, proc.returncode, out.read(), err.read()), own, rss


_PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


def rss_summary(rss: list[tuple[float, int]]) -> dict[str, object]:
    """When the sampled RSS peaked and ten samples across the run (MB)."""
    if not rss:
        return {}
    at, peak = max(rss, key=lambda s: s[1])
    step = max(1, len(rss) // 10)
    return {
        "rss_peak_at": f"{at:.0f}/{rss[-1][0]:.0f} s",
        "rss_timeline_mb": " ".join(str(round(kb / 1024)) for _, kb in rss[::step][:10]),
    }


def run_size(n: int, seed: Path, a: argparse.Namespace) -> dict[str, object]:
    tmp = Path(tempfile.mkdtemp(prefix=f"ngreplay-{n}-"))
    try:
        t0 = time.perf_counter()
        bundle, inventory = replicate(seed, n, tmp)
        build_s = time.perf_counter() - t0
        reports = tmp / "reports"
        cmd = pytest_cmd(inventory, reports, "bench", "--transport", "replay",
                         f"--replay={bundle / 'raw'}", *a.extra, profile=a.profile)  # fmt: skip
        env = None
        if a.tracemalloc or a.loop_profile:  # the child imports bench/_memtrace.py first (-p)
            at = cmd.index("pytest") + 1
            cmd[at:at] = ["-p", "_memtrace"]
            env = dict(os.environ)
            if a.tracemalloc:
                env["NODEGATE_BENCH_TRACEMALLOC"] = f"{a.tracemalloc}.{n}"
            if a.loop_profile:
                env["NODEGATE_BENCH_LOOPPROF"] = f"{a.loop_profile}.{n}"
            env["PYTHONPATH"] = os.pathsep.join(
                [str(Path(__file__).parent), env.get("PYTHONPATH", "")]
            )
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        p, own, rss = run_watched(cmd, tmp, env)
        wall = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        run_dir = reports / "bench"
        if p.returncode not in (0, 1, 6) or not (run_dir / VERDICTS_FILE).exists():
            sys.stderr.write(p.stdout[-4000:] + p.stderr[-4000:])
            raise SystemExit(f"{n} nodes: pytest exited {p.returncode}")
        verdicts = read_verdicts_doc(run_dir)["verdicts"]
        items = next(
            (
                ln.rsplit(" in ", 1)[0]
                for ln in reversed(p.stdout.splitlines())
                if " passed" in ln and " in " in ln
            ),
            "?",  # fmt: skip
        )
        return {
            "nodes": n,
            "wall_s": round(wall, 1),
            "ctl_cpu_s": round(cpu, 1),
            "ms_per_node": round(cpu / n * 1000, 1),
            "ctl_own_cpu_s": round(own, 1),  # the pytest process alone, its workers left out
            "peak_rss_mb": round(r1.ru_maxrss / 1024),
            "verdicts": len(verdicts),
            "non_pass": sum(1 for v in verdicts if v.get("status") != "pass"),
            "run_dir_kb_node": round(du(run_dir) / n / 1024, 1),
            "verdicts_mb": round((run_dir / VERDICTS_FILE).stat().st_size / 1e6, 1),
            "bundle_s": round(build_s, 1),
            "rc": p.returncode,
            "pytest": items.strip("= "),
            **rss_summary(rss),
            "files_kb_node": files_kb_node(run_dir, n),
        }
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1024,5000,10000")
    ap.add_argument("--subnet", default="127.93", help="the seed fleet's loopback subnet")
    ap.add_argument("--seed", help="an existing seed run directory (skip the capture)")
    ap.add_argument("--healthy", action="store_true", help="capture the seed without faults")
    ap.add_argument("--profile", help="write the controller's cProfile here and print its top")
    ap.add_argument(
        "--loop-profile",
        help="cProfile the thread that runs the stages: written to this path plus .<size>, "
        "its top printed",
    )
    ap.add_argument(
        "--tracemalloc",
        help="trace the controller's allocations: a snapshot near "
        "its peak written to this path plus .<size>, its top sites printed",
    )
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--keep", action="store_true", help="keep each size's bundle and reports")
    ap.add_argument("extra", nargs="*", help="more pytest arguments (after --)")
    a = ap.parse_args()
    seed = Path(a.seed) if a.seed else capture_seed(a, Path(tempfile.mkdtemp(prefix="ngseed-")))
    print(f"seed bundle: {seed}", flush=True)
    rows = [run_size(int(s), seed, a) for s in a.sizes.split(",")]
    title = f"passive stages ({PASSIVE}) replayed through pytest, {os.cpu_count()} cores"
    print_table(title, rows, 14)
    if a.profile:
        print_profile(a.profile, a.top)
    for s in a.sizes.split(",") if a.loop_profile else ():
        print_profile(f"{a.loop_profile}.{s}", a.top)
    if a.tracemalloc:
        from _memtrace import print_snapshot

        for s in a.sizes.split(","):
            print_snapshot(f"{a.tracemalloc}.{s}", a.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
