"""`nodegate` command line: the demo, the simulated fleet, offline capture, the run history,
and run sugar."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodegate.core import bundled
from nodegate.core.errors import ConfigError
from nodegate.core.safetext import printable, printable_lines
from nodegate.core.words import plural

if TYPE_CHECKING:
    from nodegate.framework.stage import PassiveStage
    from nodegate.sim.fleet import Fleet

DEFAULT_SIM_ROOT = Path(".nodegate") / "sim"
DEFAULT_SUBNET = "127.77"
DIR_HELP = "fleet directory: ssh_config, keys, known_hosts, inventory, model.json"
SUBNET_HELP = "first two octets of the fleet's loopback addresses (default 127.77)"
# nodegate is imported by this CLI before pytest starts; nothing to rewrite in it.
QUIET_REWRITE = ("-W", "ignore::pytest.PytestAssertRewriteWarning")
SIM_HELP = "build: write the fleet; start/stop: its sshd daemons; up: build + start"


def cmd_sim(args: argparse.Namespace) -> int:
    from nodegate.sim.fleet import Fleet, build_fleet
    from nodegate.sim.slurm import SlurmCluster

    root = Path(args.dir)
    if args.action in ("build", "up"):
        fleet = build_fleet(args.model, root, subnet=args.subnet, port=args.port)
        print(f"built fleet at {fleet.root} from {args.model}")
        if args.action == "build":
            return 0
    fleet = Fleet(root)
    if args.action in ("start", "up"):
        fleet.start()
        st = fleet.status()
        print(
            f"started: {plural(st.running, 'sshd daemon')}, "
            f"{plural(st.listening, 'node address', 'node addresses')} listening"
        )
        if args.slurm:
            cluster = SlurmCluster(fleet.root)
            try:
                cluster.start()
            except BaseException:
                cluster.stop()
                fleet.stop()
                raise
            print(
                f"  slurm:      munged, slurmctld, {len(cluster.nodes())} slurmd; "
                f"export SLURM_CONF={cluster.conf}"
            )
        print(f"  inventory:  {fleet.root / 'inventory.yaml'}")
        print(
            f"  ssh_config: {fleet.root / 'ssh_config'}"
            f"   (ssh -F {fleet.root / 'ssh_config'} <node>)"
        )
    elif args.action == "stop":
        slurm = SlurmCluster(fleet.root).stop()
        print(
            f"stopped {fleet.stop()} sshd daemons of {fleet.root}"
            + (f" and {slurm} Slurm daemons" if slurm else "")
        )
    elif args.action == "status":
        return sim_status(fleet)
    return 0


def sim_status(fleet: Fleet) -> int:
    """`nodegate sim status`: one line, exit 0 when every sshd daemon of the fleet runs, 1 when
    some or all are stopped; a directory with no fleet built is a usage error (4)."""
    if not (fleet.root / "model.json").is_file():
        raise ConfigError(
            f"sim status: no fleet built at {fleet.root} (nodegate sim build --model M --dir DIR)"
        )
    st = fleet.status()
    daemons = f"{st.running} of {plural(st.daemons, 'sshd daemon')} up"
    if st.daemons and st.running == st.daemons:
        addresses = plural(st.nodes, "node address", "node addresses")
        print(f"running: {daemons}, {st.listening} of {addresses} listening ({fleet.root})")
        return 0
    state = "stopped" if st.running == 0 else "partly stopped"
    print(f"{state}: {daemons} ({fleet.root}); start it: nodegate sim start --dir {fleet.root}")
    return 1


class _RunDir:
    """The demo's own `pytest_nodegate_admission` consumer: where this run's reports are."""

    def __init__(self) -> None:
        self.path: Path | None = None

    def pytest_nodegate_admission(self, doc: dict[str, Any], run_dir: Path) -> None:
        self.path = run_dir


# The demo's last line: what its exit code means (README "Exit codes"); its fleet has injected
# faults, so 1 is the expected outcome.
DEMO_EXITS = {
    0: "every node admitted; the demo's injected faults should have rejected some: check --model",
    1: "some nodes rejected, as this demo intends: its fleet has injected faults",
    2: "interrupted: no node admitted",
    4: "usage error",
    6: "not qualified: the run did not cover the admission policy",
    7: "regressed against the baseline",
    8: "an --act action failed",
}


def cmd_demo(args: argparse.Namespace) -> int:
    """Start a simulated fleet with faults, qualify it over real SSH, stop it."""
    import pytest

    from nodegate.sim.fleet import build_fleet

    root = Path(args.dir)
    model = args.model or str(bundled.demo_model())
    reports_dir = bundled.default_reports_dir(Path.cwd())
    fleet = build_fleet(model, root, subnet=args.subnet)
    print(f"nodegate demo: simulated fleet from {model} -> {fleet.root}")
    run_dir = _RunDir()
    try:
        fleet.start()
        st = fleet.status()
        print(
            f"  {plural(st.nodes, 'node')}, {plural(st.running, 'sshd daemon')}, "
            f"{plural(st.listening, 'address', 'addresses')} listening"
        )
        pytest_args = [
            *bundled.suite_args(),
            f"--inventory={fleet.root / 'inventory.yaml'}",
            f"--reports-dir={reports_dir}",
            "-p",
            "no:cacheprovider",
            "-q",
            "--no-header",
            "-rN",
            "--tb=no",
            # The suites assert through nodegate_check: nothing to rewrite, so no rewritten
            # bytecode is written beside an installed package (nor a warning that the
            # already imported nodegate cannot be rewritten).
            "--assert=plain",
            *group_args(args.pytest_args),
        ]
        print("  pytest " + " ".join(pytest_args), flush=True)
        rc = int(pytest.main(pytest_args, plugins=[run_dir]))
    finally:
        if not args.keep:
            fleet.stop()
            print(f"fleet stopped ({fleet.root})")
        else:
            print(f"fleet left running; stop it with: nodegate sim stop --dir {fleet.root}")
    # This run's directory (reports/latest stays on the last complete run when interrupted).
    if run_dir.path is not None:
        files = "report.html, admission.json, junit.xml, verdicts.jsonl.gz, raw/"
        print(f"reports: {run_dir.path}  ({files})")
    print(f"exit code {rc}: {DEMO_EXITS.get(rc, 'error, see above')}")
    return rc


def cmd_fabric(args: argparse.Namespace) -> int:
    """`nodegate fabric snapshot RUN_DIR --out FILE`: the fabric a run discovered, as the
    golden snapshot later runs diff against (inventory `settings.fabric_snapshot`)."""
    from nodegate.stages.fabric.snapshot import write_snapshot

    doc = write_snapshot(Path(args.run_dir), Path(args.out))
    for name, sub in sorted(doc["subnets"].items()):
        rails = sum(len(devs) for devs in sub["nodes"].values())
        ups = sum(len(ports) for ports in sub["uplinks"].values())
        print(
            f"subnet {name}: {len(sub['nodes'])} nodes, {rails} rail cables, "
            f"{len(sub['uplinks'])} leaves, {ups} uplinks -> {args.out}"
        )
    return 0


def cmd_capture(args: argparse.Namespace) -> int:
    """Run the selected stages' commands on nodes and keep the outputs as a replay bundle."""
    from nodegate.core.settings import build_settings
    from nodegate.inventory import load_inventory
    from nodegate.profiles import ProfileLibrary
    from nodegate.session.transports import builtin_hook, known_transports, make_transport
    from nodegate.transport.evidence import EvidenceWriter

    hook = builtin_hook()
    settings = build_settings(
        vars(args), {}, known_transports=known_transports(hook), rootpath=Path.cwd()
    )
    stages = [_passive_stage(name.strip()) for name in args.stages.split(",")]
    nodes = list(load_inventory(args.nodegate_inventory).select(settings.nodes))
    lib = ProfileLibrary(settings.profile_search_path())
    plans = {
        st.name: {
            n.name: st.commands(n, lib.get(settings.profile or n.profile or "")) for n in nodes
        }
        for st in stages
    }
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ConfigError(
            f"--out: got {args.out!r}, expected a directory for the bundle (absent or a "
            "directory; a file is there)"
        )
    transport = make_transport(hook, settings, nodes, EvidenceWriter(out, settings.transport))
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--out: got {args.out!r}, cannot make it: {exc.strerror}") from None

    async def go() -> int:
        bad = 0
        try:
            for name, plan in plans.items():
                outs = await transport.run_stage(name, plan)
                for o in outs.values():
                    line = f"{o.node} {name}: {o.reach.value} {len(o.results)} commands {o.detail}"
                    print(printable(line))
                    bad += o.reach.value != "ok"
        finally:
            await transport.close()
        return 1 if bad else 0

    rc = asyncio.run(go())
    print(
        f"bundle: {out}  (replay: pytest suites --inventory {args.nodegate_inventory} "
        f"--transport replay --replay {out})"
    )
    return rc


def _passive_stage(name: str) -> PassiveStage[Any, Any]:
    """A stage that can be captured (reads node state only), or a ConfigError saying why."""
    from nodegate.framework.stage import PassiveStage
    from nodegate.stages.registry import STAGES

    by_name = {s.name: s for s in STAGES}
    st = by_name.get(name)
    if st is None:
        raise ConfigError(f"--stages: unknown stage {name!r}; known: {', '.join(by_name)}")
    if not isinstance(st, PassiveStage):
        raise ConfigError(f"stage {name} is active; only passive stages can be captured")
    return st


def group_args(pytest_args: list[str]) -> list[str]:
    """`--nodes @rack03` as `--nodes=@rack03`: pytest reads an argument that starts with `@`
    as a file of arguments; joined to its option, the group name reaches nodegate.

    >>> group_args(["--nodes", "@rack03", "-k", "kernel"])
    ['--nodes=@rack03', '-k', 'kernel']
    """
    out: list[str] = []
    args = iter(pytest_args)
    for a in args:
        if a == "--nodes":
            value = next(args, None)
            if value is None:
                out.append(a)
            elif value.startswith("@"):
                out.append(f"{a}={value}")
            else:
                out += [a, value]
        elif a == "--":
            out += [a, *args]
        else:
            out.append(a)
    return out


def cmd_run(pytest_args: list[str]) -> int:
    """`pytest <shipped suites> ARGS...`: every argument goes to pytest (`--nodes @group`
    joined to its option, see `group_args`)."""
    import pytest

    return int(pytest.main([*bundled.suite_args(), *QUIET_REWRITE, *group_args(pytest_args)]))


def _add_settings_options(p: argparse.ArgumentParser, *flags: str, required: bool = False) -> None:
    """The pytest plugin's options, same names, help and validation (nodegate.core.settings)."""
    from nodegate.core.settings import OPTION

    for flag in flags:
        o = OPTION[flag]
        if o.kind == "flag":
            p.add_argument(o.flag, dest=o.dest, help=o.help, action="store_true")
        else:
            action = "append" if o.kind == "append" else "store"
            p.add_argument(
                o.flag,
                dest=o.dest,
                help=o.help,
                metavar=o.metavar,
                action=action,
                required=required,
            )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nodegate", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)

    d = sub.add_parser("demo", help="qualify a simulated fleet with injected faults")
    d.add_argument("--model", help=f"fleet model YAML (default {bundled.demo_model()})")
    d.add_argument("--dir", default=str(DEFAULT_SIM_ROOT / "demo"), help=DIR_HELP)
    d.add_argument("--subnet", default=DEFAULT_SUBNET, help=SUBNET_HELP)
    d.add_argument("--keep", action="store_true", help="leave the fleet running")
    d.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    d.set_defaults(func=cmd_demo)

    s = sub.add_parser("sim", help="simulated fleet: build, start, stop, status, up")
    s.add_argument("action", choices=["build", "start", "stop", "status", "up"], help=SIM_HELP)
    s.add_argument("--model", default=str(bundled.demo_model()), help="fleet model YAML")
    s.add_argument("--dir", default=str(DEFAULT_SIM_ROOT / "demo"), help=DIR_HELP)
    s.add_argument("--subnet", default=DEFAULT_SUBNET, help=SUBNET_HELP)
    s.add_argument("--port", type=int, default=None, help="sshd port of every node (default 2222)")
    s.add_argument(
        "--slurm",
        action="store_true",
        help="start/up: also start a real Slurm cluster over the fleet (munged, slurmctld, one "
        "slurmd per node, all on loopback); stop stops it",
    )
    s.set_defaults(func=cmd_sim)

    c = sub.add_parser("capture", help="capture a replay bundle of stage commands")
    _add_settings_options(c, "--inventory", required=True)
    c.add_argument(
        "--stages", default="reach", help="comma-separated passive stages (default reach)"
    )
    c.add_argument("--out", required=True, help="bundle directory to write (raw/ layout)")
    _add_settings_options(
        c,
        "--nodes",
        "--profile",
        "--profiles-dir",
        "--transport",
        "--replay",
        "--fanout",
        "--connect-timeout",
        "--accept-new-hostkeys",
    )
    c.set_defaults(func=cmd_capture)

    f = sub.add_parser("fabric", help="fabric topology: write a golden snapshot from a run")
    f.add_argument("action", choices=["snapshot"], help="snapshot: the topology a run discovered")
    f.add_argument("run_dir", help="a run directory whose fabric stage ran (reports/<run-id>)")
    f.add_argument("--out", required=True, help="snapshot file to write (JSON)")
    f.set_defaults(func=cmd_fabric)

    from nodegate.history.commands import add_parser as add_history_parser

    add_history_parser(sub)

    sub.add_parser(
        "run",
        help="pytest on the shipped suites; every argument after `run` goes to pytest "
        "(`nodegate run --help` is pytest's help, nodegate's options included)",
        add_help=False,
    )
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["run"]:
        # Everything after `run` is pytest's (`-m reach`, `--inventory x`, `--help`):
        # argparse would claim options it does not know, so `run` bypasses it.
        return cmd_run(argv[1:])
    args = _parser().parse_args(argv)
    try:
        rc: int = args.func(args)
        return rc
    except ConfigError as exc:
        print(f"nodegate: {printable_lines(exc)}", file=sys.stderr)
        return 4
    except KeyboardInterrupt:
        print("nodegate: interrupted", file=sys.stderr)
        return 2  # README "Exit codes"


if __name__ == "__main__":
    sys.exit(main())
