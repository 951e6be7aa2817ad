"""The run's settings: every nodegate option, read once from the command line or its ini twin
(`nodegate_<name>`), validated, frozen.

The pytest plugin and the `nodegate` CLI both build a `Settings` with `build_settings()`; a bad
value is a `ConfigError` naming the option (and the ini name when it came from there) and what
is accepted, which the callers turn into a usage error (exit 4):

>>> build_settings({"nodegate_fanout": "0"}, {}, known_transports={"ssh"}, rootpath=Path("."))
Traceback (most recent call last):
nodegate.core.errors.ConfigError: --fanout: got '0', expected a whole number >= 1
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nodegate.core import bundled
from nodegate.core.drainlimit import DrainLimit
from nodegate.core.errors import ConfigError
from nodegate.core.names import NAME_RULE, is_name

DEFAULT_FANOUT = 256
# Below this many nodes an unset --jobs judges in process: the parsing a pool spreads is small
# there against its fork and the pickling of every outcome (on 2 cores even 1,024 replayed
# nodes were faster with 2 workers in one pair of runs and slower in the other), and every
# small run (a test fleet, a CI gate of a few nodes) stays one process.
POOL_MIN_NODES = 256
# Remote processes (SSH channels, srun children) active stages keep open at once over the
# fleet. Channels share each node's one connection, so the cost is the controller's: measured
# 5.8 KB of RSS and 0.36 ms of CPU per open channel (bench/bench_channels.py), plus what each
# prints (an ib_write_bw side: ~2 KB). 8,192 is a whole 1,024-node, 8-rail ib_pairs round at
# once (4,096 pairs, two processes each: ~50 MB, ~3 s of CPU to open), while still bounding
# what one controller holds on a larger fleet (a 5,000-node round runs in five waves).
DEFAULT_MAX_ACTIVE = 8192
DEFAULT_TRANSPORT = "ssh"
REPLAY_TRANSPORT = "replay"
BUNDLE_HINT = "a capture bundle or a run's raw/"
ACTIONS = ("slurm", "kubernetes")  # built-in --act names (nodegate.actions)
PROGRESS_MODES = ("auto", "live", "plain", "off")
# --level: how deep a run qualifies, shallowest first; each profile says what each runs
# (its `levels:`, nodegate.profiles.at_level).
LEVELS = ("quick", "standard", "extended")
DEFAULT_LEVEL = "standard"  # --progress (nodegate.session.display)
DEFAULT_SUMMARY_LINES = 30  # reason lines: with the header, one screen at 1,024 nodes
# --items: one pytest item per (check, node), or per check over the run's nodes; `auto` is
# per node up to AUTO_NODE_ITEMS nodes (README "Scale": measured in bench_replay_scale).
ITEM_MODES = ("auto", "node", "check")
AUTO_NODE_ITEMS = 256
# --evidence-nodes: how many cited nodes (rejected, or with a waived failure) get plain JSON
# evidence and pages (nodegate.reports.expanded): ~500 KB each at an 8-GPU node
# (bench_replay_scale), so 128 of them are ~6.4 KB per node of a 10,000-node run directory
# (256: 12.7, which with the rest leaves no room under #27's 50 KB per node).
DEFAULT_EVIDENCE_NODES = 128

_TRUE = frozenset({"true", "yes", "1", "on"})
_FALSE = frozenset({"false", "no", "0", "off"})
_WHOLE = re.compile(r"[+-]?\d+")


@dataclass(frozen=True, slots=True)
class OptionSpec:
    """One nodegate option: its flag, help, and how it is given (value, flag or repeated)."""

    flag: str
    help: str
    metavar: str | None = None
    kind: str = "value"  # "value" | "flag" (store_true) | "append" (repeatable)

    @property
    def dest(self) -> str:
        """The argparse destination, which is also the ini twin's name: `nodegate_fanout`."""
        return "nodegate_" + self.flag[2:].replace("-", "_")


OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("--inventory", "inventory file (nodegate YAML, Ansible INI or YAML)", "PATH"),
    OptionSpec("--nodes", "select nodes: names, nodeset gpu[001-004], @group, ! & ^", "EXPR"),
    OptionSpec("--profile", "use this profile for every selected node", "NAME"),
    OptionSpec(
        "--profiles-dir",
        "extra profile directory, searched before the shipped ones (repeatable; "
        "the ini twin takes whitespace-separated directories)",
        "DIR",
        "append",
    ),
    OptionSpec(
        "--level",
        f"qualification depth: {', '.join(LEVELS)} (default {DEFAULT_LEVEL}); what each runs "
        "per stage is the profile's `levels:`",
        "LEVEL",
    ),
    OptionSpec("--fanout", f"concurrent node sessions (default {DEFAULT_FANOUT})", "N"),
    OptionSpec(
        "--max-active",
        "remote processes active stages keep open at once over the fleet "
        f"(default: the inventory's settings.max_active, else {DEFAULT_MAX_ACTIVE})",
        "N",
    ),
    OptionSpec(
        "--jobs",
        "worker processes that parse and judge the passive stages' output (default: the "
        f"usable cores from {POOL_MIN_NODES} nodes up, else 1; 1: in the controller's own "
        "process, no pool)",
        "N",
    ),
    OptionSpec(
        "--connect-timeout",
        "SSH connect deadline in seconds (default: inventory, ssh_config, then 10)",
        "S",
    ),
    OptionSpec(
        "--accept-new-hostkeys",
        "trust and record keys of hosts absent from known_hosts (a changed key is still refused)",
        kind="flag",
    ),
    OptionSpec(
        "--transport",
        "how nodes are reached: ssh, slurm, local, replay or a plugin's "
        f"(default {DEFAULT_TRANSPORT})",
        "NAME",
    ),
    OptionSpec("--replay", f"the bundle --transport replay answers from ({BUNDLE_HINT})", "DIR"),
    OptionSpec("--reports-dir", "where run directories go (default reports/)", "DIR"),
    OptionSpec("--run-id", "run directory name (default: UTC timestamp + random)", "ID"),
    OptionSpec(
        "--save-baseline", "CI A/B: store this run's facts and metrics in DIR/baseline.json", "DIR"
    ),
    OptionSpec(
        "--compare-to",
        "CI A/B: compare this run with the baseline in DIR, or with a recorded run: "
        "history:last-complete, history:<run-id> (compare.json; exit 7 if regressed)",
        "DIR",
    ),
    OptionSpec(
        "--history",
        "run history database: sqlite:///PATH, postgresql+psycopg://USER@HOST/DB or off "
        "(default: the inventory's settings.history, else sqlite:///<reports-dir>/history.sqlite)",
        "URL",
    ),
    # Admission (nodegate.admission, nodegate.actions)
    OptionSpec("--waivers", "YAML file of waivers: check, nodes, reason, owner, expires", "FILE"),
    OptionSpec(
        "--allow-incomplete",
        "let a run that did not cover the admission policy move reports/latest and act",
        kind="flag",
    ),
    OptionSpec(
        "--act",
        f"act on the decision: {' or '.join(ACTIONS)} (repeatable; the ini twin takes "
        "whitespace-separated names; dry-run unless --apply)",
        "NAME",
        "append",
    ),
    OptionSpec(
        "--apply", "carry out the --act actions (default: dry-run, a plan only)", kind="flag"
    ),
    OptionSpec("--kubeconfig", "kubeconfig for --act kubernetes --apply", "FILE"),
    OptionSpec(
        "--max-drain",
        "--act takes at most N nodes (or P percent of the run's nodes) out of "
        "service, else none (exit 8; default: the inventory's settings.max_drain, else the "
        "profiles', else 10 percent or 8 nodes, whichever is larger)",
        "N|P%",
    ),
    # The terminal (nodegate.session.display, nodegate.reports.terminal)
    OptionSpec(
        "--progress",
        "stage progress while the fleet is gathered: auto (live bars on a terminal, plain "
        "lines otherwise, none with -q off a terminal), live, plain or off (default auto)",
        "MODE",
    ),
    OptionSpec(
        "--item-reports",
        "show pytest's per-item failure reports (FAILURES section, FAILED lines); off by "
        "default in nodegate runs, whose evidence is in the run directory",
        kind="flag",
    ),
    OptionSpec(
        "--items",
        "pytest items: node (one per check and node), check (one per check over the run's "
        f"nodes; nodegate writes junit.xml per check and node) or auto (node up to "
        f"{AUTO_NODE_ITEMS} nodes, check above; the default)",
        "MODE",
    ),
    OptionSpec(
        "--evidence-nodes",
        "the rejected (or waived) nodes whose evidence is expanded to plain JSON with a page "
        f"per stage (default {DEFAULT_EVIDENCE_NODES}: one node per failing check and "
        "component first, then by name; the others keep .json.gz only; 0: none)",
        "N",
    ),
    OptionSpec(
        "--summary-lines",
        f"reason lines in the admission summary (default {DEFAULT_SUMMARY_LINES}; 0: every reason)",
        "N",
    ),
)
OPTION = {o.flag: o for o in OPTIONS}


def usable_cores() -> int:
    """The cores this process may run on (its affinity, which a cgroup or taskset narrows)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True, slots=True)
class Settings:
    """Every nodegate option of one run, validated. `inventory` None: the plugin is inactive."""

    inventory: str | None = None
    nodes: str | None = None
    profile: str | None = None
    profiles_dirs: tuple[Path, ...] = ()  # the user's, searched before the shipped profiles
    level: str = DEFAULT_LEVEL  # one of LEVELS
    fanout: int = DEFAULT_FANOUT
    max_active: int | None = None  # None: the inventory's settings.max_active, else the default
    jobs: int | None = None  # parse+judge workers (framework.pool); None: `judge_workers`
    connect_timeout_s: float | None = None  # None: the inventory's, then ssh_config's, then 10
    accept_new_hostkeys: bool = False
    transport: str = DEFAULT_TRANSPORT
    replay_dir: Path | None = None
    reports_dir: Path = Path("reports")
    run_id: str | None = None  # None: the controller makes one up
    save_baseline: Path | None = None  # CI A/B mode (nodegate.compare.abmode)
    compare_to: Path | None = None
    history: str | None = None  # a URL or "off" (nodegate.history); None: inventory, default
    waivers: Path | None = None
    allow_incomplete: bool = False
    act: tuple[str, ...] = ()
    apply: bool = False
    kubeconfig: Path | None = None
    max_drain: DrainLimit | None = None  # None: the inventory's, else the profiles', else default
    progress: str = "auto"  # one of PROGRESS_MODES; "auto" is resolved against the terminal
    item_reports: bool = False
    items: str = "auto"  # one of ITEM_MODES; `auto` is resolved against the node count
    summary_lines: int = DEFAULT_SUMMARY_LINES  # 0: every reason
    evidence_nodes: int = DEFAULT_EVIDENCE_NODES  # 0: none expanded

    def judge_workers(self, nodes: int) -> int:
        """Parse+judge workers for a run of `nodes`: --jobs when given, else the usable cores
        from POOL_MIN_NODES nodes up and 1 (in process) below."""
        if self.jobs is not None:
            return self.jobs
        return usable_cores() if nodes >= POOL_MIN_NODES else 1

    def active_limit(self, inventory_max_active: int | None) -> int:
        """The channel limit of active stages: given (command line or ini), else the
        inventory's (a simulated fleet's lower one), else DEFAULT_MAX_ACTIVE."""
        if self.max_active is not None:
            return self.max_active
        return DEFAULT_MAX_ACTIVE if inventory_max_active is None else inventory_max_active

    def per_check(self, nodes: int) -> bool:
        """Whether a run of `nodes` nodes has one pytest item per check (`--items`)."""
        return self.items == "check" or (self.items == "auto" and nodes > AUTO_NODE_ITEMS)

    def profile_search_path(self) -> list[Path]:
        """Profile directories in the order they are searched: the user's, then the shipped."""
        return [*self.profiles_dirs, bundled.profiles_dir()]


@dataclass(frozen=True, slots=True)
class _Given:
    """A value as given, and where: the command line, or the ini twin."""

    spec: OptionSpec
    value: object
    from_ini: bool

    def bad(self, expected: str) -> ConfigError:
        where = f" (from ini {self.spec.dest})" if self.from_ini else ""
        return ConfigError(f"{self.spec.flag}{where}: got {self.value!r}, expected {expected}")


def _given(spec: OptionSpec, cli: Mapping[str, object], ini: Mapping[str, object]) -> _Given:
    """The command line wins; an unset flag (False) or an empty list is not given."""
    value = cli.get(spec.dest)
    if value is not None and value is not False and value != []:
        return _Given(spec, value, False)
    raw = ini.get(spec.dest)
    if raw is not None and raw != "" and raw != []:
        return _Given(spec, raw, True)
    return _Given(spec, None, False)


def _text(g: _Given) -> str | None:
    return None if g.value is None else str(g.value)


def _whole(g: _Given, default: int) -> int:
    if g.value is None:
        return default
    text = str(g.value).strip()
    if isinstance(g.value, bool) or not _WHOLE.fullmatch(text) or int(text) < 1:
        raise g.bad("a whole number >= 1")
    return int(text)


def _optional_whole(g: _Given) -> int | None:
    return None if g.value is None else _whole(g, 0)


def _seconds(g: _Given) -> float | None:
    if g.value is None:
        return None
    try:
        s = float(str(g.value).strip())
    except ValueError:
        s = math.nan
    if isinstance(g.value, bool) or not (math.isfinite(s) and s > 0):
        raise g.bad("a number of seconds > 0")
    return s


def _boolean(g: _Given) -> bool:
    if g.value is None:
        return False
    if isinstance(g.value, bool):
        return g.value
    word = str(g.value).strip().lower()
    if word in _TRUE or word in _FALSE:
        return word in _TRUE
    raise g.bad("one of true/false, yes/no, 1/0, on/off")


def _dirs(g: _Given) -> tuple[Path, ...]:
    if g.value is None:
        return ()
    if isinstance(g.value, str):  # the ini twin: whitespace-separated directories
        dirs = tuple(Path(d) for d in g.value.split())
    elif isinstance(g.value, (list, tuple)):
        dirs = tuple(Path(str(d)) for d in g.value)
    else:
        raise g.bad("one or more directories")
    for d in dirs:
        if not d.is_dir():  # a typo would silently fall back to the shipped profiles
            raise dataclasses.replace(g, value=str(d)).bad("an existing directory")
    return dirs


def _count(g: _Given, default: int) -> int:
    if g.value is None or g.value == "":
        return default
    text = str(g.value).strip()
    if isinstance(g.value, bool) or not (text.isascii() and text.isdigit()):
        raise g.bad("a whole number >= 0")
    return int(text)


def _progress(g: _Given) -> str:
    return _choice(g, PROGRESS_MODES)


def _choice(g: _Given, modes: tuple[str, ...]) -> str:
    """One of `modes`; not given (or empty): the first."""
    mode = modes[0] if g.value is None or g.value == "" else str(g.value).strip()
    if mode not in modes:
        raise g.bad("one of " + ", ".join(modes))
    return mode


def _run_id(g: _Given) -> str | None:
    """A run id names a directory under --reports-dir: a plain name, never a path."""
    if g.value is None:
        return None
    if not is_name(g.value) or g.value == "latest":
        raise g.bad(f"a name of {NAME_RULE}, other than 'latest'")
    return str(g.value)


def _baseline_dir(g: _Given, *, must_exist: bool) -> Path | None:
    """A baseline directory: one holding a baseline (--compare-to), or one to write to."""
    if g.value is None:
        return None
    path = Path(str(g.value))
    if must_exist and str(g.value).startswith("history:"):
        return path  # a run recorded in the history (nodegate.compare.from_history)
    if must_exist and not path.is_dir():
        raise g.bad("an existing directory holding a baseline.json (from --save-baseline)")
    if path.exists() and not path.is_dir():
        raise g.bad("a directory (made if missing)")
    return path


def _transport(g: _Given, known: Collection[str]) -> str:
    name = DEFAULT_TRANSPORT if g.value is None else str(g.value).strip()
    if name not in known:
        raise g.bad("one of " + ", ".join(sorted(known)))
    return name


def _replay(g: _Given, transport: str) -> Path | None:
    if g.value is None:
        if transport == REPLAY_TRANSPORT:
            raise ConfigError(f"--transport replay needs --replay DIR ({BUNDLE_HINT})")
        return None
    path = Path(str(g.value))
    if not path.is_dir():
        raise g.bad(f"an existing directory ({BUNDLE_HINT})")
    return path


def _file(g: _Given) -> Path | None:
    if g.value is None:
        return None
    path = Path(str(g.value))
    if not path.is_file():
        raise g.bad("an existing file")
    return path


def _act(g: _Given) -> tuple[str, ...]:
    if g.value is None:
        return ()
    raw = g.value
    if isinstance(raw, str):  # the ini twin: whitespace-separated names
        words = raw.split()
    elif isinstance(raw, (list, tuple)):
        words = [str(v) for v in raw]
    else:
        raise g.bad("one of " + ", ".join(ACTIONS))
    for w in words:
        if w not in ACTIONS:
            raise g.bad("one of " + ", ".join(ACTIONS))
    return tuple(dict.fromkeys(words))


def _admission_checks(act: tuple[str, ...], apply: bool, kubeconfig: Path | None) -> None:
    if apply and not act:
        raise ConfigError("--apply: nothing to apply (give --act slurm or --act kubernetes)")
    if apply and "kubernetes" in act and kubeconfig is None:
        raise ConfigError("--act kubernetes --apply needs --kubeconfig FILE")


def build_settings(
    cli: Mapping[str, object],
    ini: Mapping[str, object],
    *,
    known_transports: Collection[str],
    rootpath: Path,
) -> Settings:
    """Settings from command-line values and ini twins, both keyed by `OptionSpec.dest`.

    `known_transports`: the names some transport plugin builds; `rootpath`: where the default
    reports directory is (pytest's rootdir, or the working directory of the CLI).
    """

    def given(flag: str) -> _Given:
        return _given(OPTION[flag], cli, ini)

    transport = _transport(given("--transport"), known_transports)
    reports = _text(given("--reports-dir"))
    return Settings(
        inventory=_text(given("--inventory")),
        nodes=_text(given("--nodes")),
        profile=_text(given("--profile")),
        profiles_dirs=_dirs(given("--profiles-dir")),
        level=_level(given("--level")),
        fanout=_whole(given("--fanout"), DEFAULT_FANOUT),
        max_active=_optional_whole(given("--max-active")),
        jobs=_optional_whole(given("--jobs")),
        connect_timeout_s=_seconds(given("--connect-timeout")),
        accept_new_hostkeys=_boolean(given("--accept-new-hostkeys")),
        transport=transport,
        replay_dir=_replay(given("--replay"), transport),
        reports_dir=Path(reports) if reports else bundled.default_reports_dir(rootpath),
        run_id=_run_id(given("--run-id")),
        save_baseline=_baseline_dir(given("--save-baseline"), must_exist=False),
        compare_to=_baseline_dir(given("--compare-to"), must_exist=True),
        history=_text(given("--history")),
        **_admission(given),
        progress=_progress(given("--progress")),
        item_reports=_boolean(given("--item-reports")),
        items=_choice(given("--items"), ITEM_MODES),
        summary_lines=_count(given("--summary-lines"), DEFAULT_SUMMARY_LINES),
        evidence_nodes=_count(given("--evidence-nodes"), DEFAULT_EVIDENCE_NODES),
    )


def _level(g: _Given) -> str:
    if g.value is None:
        return DEFAULT_LEVEL
    level = str(g.value).strip()
    if level not in LEVELS:
        raise g.bad("one of " + ", ".join(LEVELS))
    return level


def _admission(given: Callable[[str], _Given]) -> dict[str, Any]:
    """The admission options, checked together."""
    act = _act(given("--act"))
    apply = _boolean(given("--apply"))
    kubeconfig = _file(given("--kubeconfig"))
    _admission_checks(act, apply, kubeconfig)
    return {
        "waivers": _file(given("--waivers")),
        "allow_incomplete": _boolean(given("--allow-incomplete")),
        "act": act,
        "apply": apply,
        "kubeconfig": kubeconfig,
        "max_drain": _max_drain(given("--max-drain")),
    }


def _max_drain(g: _Given) -> DrainLimit | None:
    if g.value is None:
        return None
    try:
        return DrainLimit.parse(str(g.value))
    except ValueError as exc:
        raise g.bad(str(exc)) from None
