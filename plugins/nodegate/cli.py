"""`nodegate` command line: the demo, the simulated fleet, offline capture, and run sugar."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from nodegate import bundled
from nodegate.errors import ConfigError

DEFAULT_SIM_ROOT = Path(".nodegate") / "sim"


def cmd_sim(args: argparse.Namespace) -> int:
    from nodegate.sim.fleet import Fleet, build_fleet

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
        print(f"started: {st.running} sshd daemons, {st.listening} node addresses listening")
        print(f"  inventory:  {fleet.root / 'inventory.yaml'}")
        print(
            f"  ssh_config: {fleet.root / 'ssh_config'}"
            f"   (ssh -F {fleet.root / 'ssh_config'} <node>)"
        )
    elif args.action == "stop":
        print(f"stopped {fleet.stop()} sshd daemons of {fleet.root}")
    elif args.action == "status":
        st = fleet.status()
        print(
            json.dumps(
                st.__dict__
                if hasattr(st, "__dict__")
                else {k: getattr(st, k) for k in st.__slots__},
                indent=1,
            )
        )
        return 0 if st.running == st.daemons and st.daemons else 3
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Start a simulated fleet with faults, qualify it over real SSH, stop it."""
    import pytest

    from nodegate.sim.fleet import build_fleet

    root = Path(args.dir)
    model = args.model or str(bundled.demo_model())
    fleet = build_fleet(model, root, subnet=args.subnet)
    print(f"nodegate demo: simulated fleet from {model} -> {fleet.root}")
    fleet.start()
    st = fleet.status()
    print(f"  {st.nodes} nodes, {st.running} sshd daemons, {st.listening} addresses listening")
    try:
        pytest_args = [
            *bundled.suite_args(),
            f"--inventory={fleet.root / 'inventory.yaml'}",
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
            *args.pytest_args,
        ]
        print("  pytest " + " ".join(pytest_args), flush=True)
        rc = int(pytest.main(pytest_args))
    finally:
        if not args.keep:
            fleet.stop()
            print(f"fleet stopped ({fleet.root})")
        else:
            print(f"fleet left running; stop it with: nodegate sim stop --dir {fleet.root}")
    reports = bundled.default_reports_dir(bundled.suites_rootdir()) / "latest"
    if reports.exists():
        print(f"reports: {reports.resolve()}  (admission.json, junit.xml, verdicts.json, raw/)")
    print(f"exit code {rc} ({ {0: 'all admitted', 1: 'some nodes rejected'}.get(rc, 'error') })")
    return rc


def cmd_capture(args: argparse.Namespace) -> int:
    """Run the selected stages' commands on nodes and keep the outputs as a replay bundle."""
    from nodegate.inventory import load_inventory
    from nodegate.profiles import ProfileLibrary
    from nodegate.stages.base import PassiveStage
    from nodegate.stages.registry import stage
    from nodegate.transport.base import Transport
    from nodegate.transport.evidence import EvidenceWriter

    inv = load_inventory(args.inventory)
    nodes = list(inv.select(args.nodes))
    lib = ProfileLibrary([*(args.profiles_dir or []), str(bundled.profiles_dir())])
    out = Path(args.out)
    ev = EvidenceWriter(out, args.transport)
    transport: Transport
    if args.transport == "local":
        from nodegate.transport.local import LocalTransport

        transport = LocalTransport(evidence=ev)
    else:
        from nodegate.transport.ssh import SSHTransport

        transport = SSHTransport(
            nodes, fanout=args.fanout, evidence=ev, accept_new_hostkeys=args.accept_new_hostkeys
        )

    async def go() -> int:
        bad = 0
        try:
            for name in args.stages.split(","):
                st = stage(name.strip())
                if not isinstance(st, PassiveStage):
                    raise ConfigError(
                        f"stage {name} is active; only passive stages can be captured"
                    )
                plan = {}
                for n in nodes:
                    prof = lib.get(args.profile or n.profile or "")
                    plan[n.name] = st.commands(n, prof)
                outs = await transport.run_stage(st.name, plan)
                for o in outs.values():
                    print(
                        f"{o.node} {st.name}: {o.reach.value} {len(o.results)} commands {o.detail}"
                    )
                    bad += o.reach.value != "ok"
        finally:
            await transport.close()
        return 1 if bad else 0

    rc = asyncio.run(go())
    print(
        f"bundle: {out}  (replay: pytest suites --inventory {args.inventory} "
        f"--transport replay --replay {out})"
    )
    return rc


def cmd_run(args: argparse.Namespace) -> int:
    import pytest

    return int(pytest.main([*bundled.suite_args(), *args.pytest_args]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="nodegate", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)

    d = sub.add_parser("demo", help="qualify a simulated fleet with injected faults")
    d.add_argument("--model", help="fleet model YAML (default inventories/sim/demo.yaml)")
    d.add_argument("--dir", default=str(DEFAULT_SIM_ROOT / "demo"))
    d.add_argument("--subnet", default="127.77")
    d.add_argument("--keep", action="store_true", help="leave the fleet running")
    d.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    d.set_defaults(func=cmd_demo)

    s = sub.add_parser("sim", help="simulated fleet: build, start, stop, status, up")
    s.add_argument("action", choices=["build", "start", "stop", "status", "up"])
    s.add_argument("--model", default=str(bundled.demo_model()))
    s.add_argument("--dir", default=str(DEFAULT_SIM_ROOT / "demo"))
    s.add_argument("--subnet", default="127.77")
    s.add_argument("--port", type=int, default=None)
    s.set_defaults(func=cmd_sim)

    c = sub.add_parser("capture", help="capture a replay bundle of stage commands")
    c.add_argument("--inventory", required=True)
    c.add_argument("--nodes")
    c.add_argument("--stages", default="reach")
    c.add_argument("--out", required=True)
    c.add_argument("--profile")
    c.add_argument("--profiles-dir", action="append")
    c.add_argument("--transport", choices=["ssh", "local"], default="ssh")
    c.add_argument("--fanout", type=int, default=256)
    c.add_argument("--accept-new-hostkeys", action="store_true")
    c.set_defaults(func=cmd_capture)

    r = sub.add_parser("run", help="pytest suites/ with the given pytest arguments")
    r.add_argument("pytest_args", nargs=argparse.REMAINDER)
    r.set_defaults(func=cmd_run)

    args = p.parse_args(argv)
    try:
        rc: int = args.func(args)
        return rc
    except ConfigError as exc:
        print(f"nodegate: {exc}", file=sys.stderr)
        return 4


if __name__ == "__main__":
    sys.exit(main())
