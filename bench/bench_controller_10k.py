"""Benchmark: what the controller does once per run at 10,000 nodes, part by part (on demand).

    .venv/bin/python bench/bench_controller_10k.py                 # 10,000 nodes
    .venv/bin/python bench/bench_controller_10k.py --sizes 1024,10000 --profile nccl_judge

Writes, in a temporary directory, the files an operator of N nodes has: a nodegate YAML
inventory with one `ssh:` entry per node (its own address) and groups per rack and leaf, the
same cluster as an Ansible INI inventory (`ansible_host=` per line), an ssh_config with one
`Host` block per node, and a known_hosts of one line per node (plain, and hashed as
`HashKnownHosts yes` writes them; one real ed25519 key). The addresses are in 10.0.0.0/8 and
are never connected to. Then times, in this process (CPU seconds, `time.process_time`):

- loading each inventory (`load_inventory`), resolving every node's SSH target through the
  ssh_config (`resolve_targets`);
- reading known_hosts and looking every node's key up in it, as the SSH transport does;
- the nccl planner: the localizer's rounds with two bad nodes (jobs fail when they hold one)
  and the demo profile's collective matrix after it, over leaves of 32 nodes (`tests/
  nccl_playback.play`; the time spent in the planner, not in the made-up outcomes), then the
  judge's verdicts for every node (`nccl.checks.Judge`);
- the traffic planner: the incast rounds and the bisection of the RoCE profile over 8 rails,
  every round passing.

Goals from issue #27: inventory and ssh_config load <= 2 s, planners <= 1 s each.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "plugins"), str(REPO)]

PER_LEAF = 32
PER_RACK = 64


def names(n: int) -> list[str]:
    return [f"gpu{i:05d}" for i in range(1, n + 1)]


def address(i: int) -> str:
    return f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"


def write_files(d: Path, n: int) -> dict[str, Path]:
    import asyncssh
    from nodegate.transport.hostkeys import _hashed_host

    key = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    hosts = names(n)
    ssh_config = d / "ssh_config"
    known = d / "known_hosts"
    hashed = d / "known_hosts.hashed"
    with ssh_config.open("w") as f:
        f.write("Host *\n  User root\n  ConnectTimeout 10\n")
        f.write(f"  UserKnownHostsFile {known}\n  StrictHostKeyChecking yes\n\n")
        for i, h in enumerate(hosts, start=1):
            f.write(f"Host {h}\n  HostName {address(i)}\n  Port 22\n\n")
    with known.open("w") as f:
        for i, h in enumerate(hosts, start=1):
            f.write(f"{h},{address(i)} {key}\n")
    with hashed.open("w") as f:  # as HashKnownHosts writes them (the transport's own writer)
        for i, h in enumerate(hosts, start=1):
            f.write("".join(f"{_hashed_host(name)} {key}\n" for name in (h, address(i))))
    inv = d / "inventory.yaml"
    with inv.open("w") as f:
        f.write("version: 1\ndefaults:\n  profile: generic-hgx-h100\n")
        f.write(f"  ssh: {{user: root, ssh_config: {ssh_config}}}\nnodes:\n")
        for i, h in enumerate(hosts, start=1):
            f.write(f"  {h}: {{ssh: {{host: {address(i)}}}}}\n")
        f.write("groups:\n")
        for kind, size, label in (("leaf", PER_LEAF, "leaf"), ("rack", PER_RACK, "r")):
            for g in range(0, n, size):
                first, last = hosts[g][3:], hosts[min(g + size, n) - 1][3:]
                no = f"{g // size + 1:04d}"
                f.write(f'  {kind}{no}: {{nodes: "gpu[{first}-{last}]", '
                        f"labels: {{{kind}: {label}{no}}}}}\n")  # fmt: skip
    ini = d / "hosts.ini"
    with ini.open("w") as f:
        for g in range(0, n, PER_LEAF):
            f.write(f"[leaf{g // PER_LEAF + 1:04d}]\n")
            for i in range(g, min(g + PER_LEAF, n)):
                f.write(f"{hosts[i]} ansible_host={address(i + 1)}\n")
            f.write("\n")
        f.write("[all:vars]\nansible_user=root\nnodegate_profile=generic-hgx-h100\n")
    return {"yaml": inv, "ini": ini, "ssh_config": ssh_config, "known": known, "hashed": hashed}


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.process_time()
    out = fn()
    return time.process_time() - t0, out


def known_hosts_lookup(
    path: Path, targets: dict[str, Any], sample: int = 0
) -> tuple[float, float, int]:
    """(read s, look every node up s, nodes with a trusted key), as SSHTransport does; with
    `sample`, only that many nodes are looked up and the time is scaled to all of them."""
    import asyncssh
    from nodegate.transport.hostkeys import lookup

    read_s, kh = timed(lambda: asyncssh.read_known_hosts([str(path)]))
    hits = 0

    chosen = list(targets.values())
    if sample and sample < len(chosen):
        chosen = chosen[:: len(chosen) // sample][:sample]

    def look() -> None:
        nonlocal hits
        for t in chosen:
            trusted = kh.match(*lookup(t, t.hostname))
            hits += bool(trusted[0])

    look_s, _ = timed(look)
    scale = len(targets) / len(chosen)
    return read_s, look_s * scale, round(hits * scale)


def accept_new(d: Path, n: int) -> float:
    """`--accept-new-hostkeys` on a new fleet: every node's key looked up (none known), learned
    and appended, as the transport does on first connection; seconds for all nodes."""
    import asyncssh
    from nodegate.inventory.loader import load_inventory
    from nodegate.transport.ssh import SSHTransport

    kh = d / "learned_known_hosts"
    cfg = d / "ssh_config_learn"
    cfg.write_text(f"Host *\n  UserKnownHostsFile {kh}\n")
    inv = d / "learn.yaml"
    with inv.open("w") as f:
        f.write(f"version: 1\ndefaults:\n  profile: generic-hgx-h100\n"
                f"  ssh: {{user: root, ssh_config: {cfg}}}\nnodes:\n")  # fmt: skip
        for i, h in enumerate(names(n), start=1):
            f.write(f"  {h}: {{ssh: {{host: {address(i)}}}}}\n")
    t = SSHTransport(load_inventory(inv).nodes)
    key = asyncssh.generate_private_key("ssh-ed25519")

    def learn() -> None:
        for tg in t.targets.values():
            if not t.known_entries(tg, tg.hostname):
                t.learn_hostkey(tg, key)

    s, _ = timed(learn)
    return s


def nccl_parts(n: int) -> tuple[float, float, int, int]:
    """(planner s, judge s, rounds, jobs): localization with two bad nodes, then the matrix."""
    from nodegate.profiles import ProfileLibrary
    from nodegate.stages.nccl.checks import Judge
    from nodegate.stages.nccl.profile import nccl_profile
    from nodegate.stages.nccl.results import JobReading

    from tests.nccl_playback import bad_nodes, play

    hosts = names(n)
    leaf = {h: f"leaf{i // PER_LEAF + 1:04d}" for i, h in enumerate(hosts)}
    prof = nccl_profile(ProfileLibrary([REPO / "inventories" / "profiles"]).get("generic-hgx-h100"))
    bad = [hosts[n // 3], hosts[2 * n // 3]]
    outcome = bad_nodes(bad)
    judged = [0.0]

    def judge(job: Any) -> bool:
        t0 = time.process_time()
        got = outcome(job)
        judged[0] += time.process_time() - t0
        return got

    total, played = timed(lambda: play(hosts, judge, leaf, matrix=prof.matrix))
    loc = played.localizer.loc
    readings = {o.test: JobReading(o.value, o.value, o.error) for o in loc.results}

    def refs(o: Any, node: str) -> tuple[str, ...]:
        return (f"raw/{node}/nccl.json#r{o.round.label}-{o.test.key}",)

    j = Judge(loc, prof, readings, refs)
    judge_s, verdicts = timed(lambda: [v for h in hosts for v in j.verdicts(h)])
    assert tuple(sorted(loc.blamed())) == tuple(sorted(bad)), sorted(loc.blamed())
    return total - judged[0], judge_s, len(played.rounds), played.jobs


def traffic_parts(n: int) -> tuple[float, int, int]:
    """(planner s, rounds, tests): every planned round, each test passing."""
    from nodegate.framework.active.rounds import Outcome
    from nodegate.profiles import ProfileLibrary
    from nodegate.stages.traffic.plan import TrafficPlan
    from nodegate.stages.traffic.profile import traffic_profile

    hosts = names(n)
    leaf = {h: f"leaf{i // PER_LEAF + 1:04d}" for i, h in enumerate(hosts)}
    prof = traffic_profile(ProfileLibrary([REPO / "inventories" / "profiles"]).get("hgx-h100-roce"))

    def run() -> tuple[int, int]:
        plan = TrafficPlan(tuple(hosts), leaf, tuple(range(8)), prof.senders, prof.seed)
        rounds = tests = 0
        pending = list(plan.first_rounds())
        while pending:
            r = pending.pop()
            rounds += 1
            tests += len(r.tests)
            for t in r.tests:
                plan.add(Outcome(t, r.id, True, 1.0))
            nxt = plan.next_round()
            if nxt is not None:
                pending.append(nxt)
        return rounds, tests

    s, (rounds, tests) = timed(run)
    return s, rounds, tests


def measure(d: Path, n: int, a: argparse.Namespace, profile: str | None) -> None:
    """One table row for `n` nodes (files under `d`); with `profile`, that part's profile."""
    from nodegate.inventory.loader import load_inventory
    from nodegate.transport.targets import resolve_targets

    files = write_files(d, n)
    inv_s, inv = timed(lambda: load_inventory(files["yaml"]))
    ini_s, inv_ini = timed(lambda: load_inventory(files["ini"]))
    assert len(inv.nodes) == n and len(inv_ini.nodes) == n
    tgt_s, targets = timed(lambda: resolve_targets(inv.nodes, None))
    kr, kl, hits = known_hosts_lookup(files["known"], targets)
    hr, hl, hhits = known_hosts_lookup(files["hashed"], targets, a.hashed_sample)
    assert hits == n and hhits == n, (hits, hhits)
    learn_s = accept_new(d, n)
    nplan, njudge, nrounds, njobs = nccl_parts(n)
    tplan, trounds, ttests = traffic_parts(n)
    times = (inv_s, ini_s, tgt_s, kr, kl, hr, hl, learn_s, nplan, njudge)
    cells: list[object] = [n, *(f"{x:.2f}" for x in times), f"{nrounds}/{njobs}",
                           f"{tplan:.2f}", f"{trounds}/{ttests}"]  # fmt: skip
    print(row(cells), flush=True)
    if profile is None:
        return
    parts: dict[str, Callable[[], Any]] = {
        "inventory": lambda: load_inventory(files["yaml"]),
        "targets": lambda: resolve_targets(inv.nodes, None),
        "nccl": lambda: nccl_parts(n),
        "traffic": lambda: traffic_parts(n),
    }
    prof = cProfile.Profile()
    prof.runcall(parts[profile])
    pstats.Stats(prof).sort_stats("tottime").print_stats(a.top)


def row(cells: Sequence[object]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000")
    ap.add_argument("--profile", choices=["inventory", "targets", "nccl", "traffic"],
                    help="cProfile one part at the largest size")  # fmt: skip
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--hashed-sample", type=int, default=200,
                    help="look this many nodes up in the hashed known_hosts, scaled to all "
                    "(each lookup tries every hashed line; 0: all nodes)")  # fmt: skip
    a = ap.parse_args()
    head = ["nodes", "inventory YAML s", "Ansible INI s", "targets (ssh_config) s",
            "known_hosts read s", "lookups s", "hashed read s", "hashed lookups s (est.)",
            "accept-new s",
            "nccl planner s", "nccl judge s", "nccl rounds/jobs", "traffic planner s",
            "traffic rounds/tests"]  # fmt: skip
    print(row(head))
    print("|" + "---|" * len(head))
    sizes = [int(s) for s in a.sizes.split(",")]
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix="ng-10k-") as tmp:
            measure(Path(tmp), n, a, profile=a.profile if n == sizes[-1] else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
