"""Parse NVIDIA Fabric Manager state: `systemctl status nvidia-fabricmanager` and its log file."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime

from nodegate.core.errors import ParseError
from nodegate.parsers.pci import normalize_bdf

STATUS_TOOL = "systemctl status"
LOG_TOOL = "fabricmanager log"

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# Unit line: `● name.service - Description` (bullet varies: ● ○ × * or none).
_UNIT = re.compile(
    r"^\W*\s*(?P<unit>[\w@.:-]+\.(?:service|socket|path|timer))(?: - (?P<desc>.*))?$"
)
_NOT_FOUND = re.compile(r"^Unit (?P<unit>\S+) could not be found\.$")
_PROP = re.compile(r"^\s*(?P<key>[A-Z][A-Za-z]*(?: PID)?):\s?(?P<value>.*)$")
_LOADED = re.compile(r"^(?P<state>[\w-]+)(?: \((?P<detail>.*)\))?$")
_ACTIVE = re.compile(
    r"^(?P<state>[\w-]+)(?: \((?P<sub>[^)]*)\))?(?: since (?P<since>[^;]+?))?(?:;\s*(?P<ago>.*))?$"
)
# systemd's LoadState/ActiveState vocabularies; anything else is a cut or foreign line.
_LOAD_STATES = {"loaded", "not-found", "bad-setting", "error", "masked", "stub", "merged"}
_ACTIVE_STATES = {
    "active", "reloading", "inactive", "failed", "activating", "deactivating", "maintenance",
    "refreshing",
}  # fmt: skip
_MAIN_PID = re.compile(r"^(?P<pid>\d+)(?: \((?P<name>[^)]*)\))?")
_JOURNAL = re.compile(
    r"^(?P<ts>[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d) (?P<host>\S+) (?P<ident>[^\s:\[]+)"
    r"(?:\[(?P<pid>\d+)\])?: (?P<msg>.*)$"
)

_ENTRY = re.compile(
    r"^\[(?P<ts>[A-Z][a-z]{2} \d{1,2} \d{4} \d\d:\d\d:\d\d)\] \[(?P<level>[A-Z]+)\] "
    r"\[tid (?P<tid>\d+)\] (?P<msg>.*)$"
)
_ENTRY_START = re.compile(r"^\[[A-Z][a-z]{2} \d")
_SESSION = re.compile(r"^Fabric Manager Log initializing at: (?P<at>.+)$")
_VERSION = re.compile(r"Fabric Manager version (?P<v>\S+) is running")
_OPTION = re.compile(r"^(?P<key>[A-Za-z][\w /()-]*?) = ?(?P<value>.*)$")
_TOPOLOGY = re.compile(r"detected system topology is based on (?P<t>.+)$")
_EXPECTED = re.compile(
    r"number of devices specified in topology file NVSwitches: (?P<s>\d+), GPUs: (?P<g>\d+)"
)
_ROUTED = "Successfully configured all the available NVSwitches to route GPU NVLink traffic"
_SWITCH = re.compile(
    r"^Index: (?P<idx>\d+)\s+Physical Id: (?P<phys>\d+)\s+PCI Bus ID: (?P<bdf>\S+)\s+"
    r"Enabled Link Mask: (?P<mask>[0-9a-fA-F]+)\s+Arch Type: (?P<arch>\d+)\s+UUID : (?P<uuid>\S+)$"
)
_GPU = re.compile(
    r"fid: (?P<fid>\d+)\s+Physical ID: (?P<phys>\d+)\s+Index: (?P<idx>\d+)\s+Handle: \S+\s+"
    r"PCI Bus ID: (?P<bdf>\S+)\s+Discovered Link Mask: (?P<disc>[0-9a-fA-F]+)\s+"
    r"Enabled Link Mask: (?P<en>[0-9a-fA-F]+)\s+UUID: (?P<uuid>\S+)$"
)
# Fabric Manager 535+ says `on fid N`; older ones (and their journal lines, corpus:
# systemctl-status-...-nvswitch-nonfatal-22013-journal) say `on NodeId N`.
_SW_ERROR = re.compile(
    r"detected NVSwitch (?P<sev>non-fatal|fatal) error (?P<code>\d+) on (?:fid|NodeId) "
    r"(?P<fid>\d+) on NVSwitch pci bus id (?P<bdf>\S+) physical id (?P<phys>\d+) port (?P<port>\d+)"
)
_SW_ERROR_HEAD = re.compile(r"detected NVSwitch (?P<sev>non-fatal|fatal) error (?P<code>\d+)\b")


@dataclass(frozen=True, slots=True)
class NvswitchError:
    """`detected NVSwitch non-fatal|fatal error <code> ... port <n>` (repeats kept as logged).

    Only a journal line clipped at the terminal width (`cut`) may lack what follows the code.
    """

    timestamp_iso: str | None
    fatal: bool
    error_code: int
    fid: int | None
    bdf: str | None
    physical_id: int | None
    port: int | None


@dataclass(frozen=True, slots=True)
class JournalLine:
    """A journal line systemctl appended; `cut` when the terminal clipped it (`>` at the end)."""

    timestamp_raw: str
    ident: str
    pid: int | None
    message: str
    cut: bool
    nvswitch_error: NvswitchError | None  # the fabric manager reported an NVSwitch error


@dataclass(frozen=True, slots=True)
class FabricManagerStatus:
    """`systemctl status nvidia-fabricmanager`: unit states, main process, journal tail."""

    unit: str
    description: str | None
    load_state: str
    unit_file: str | None
    unit_file_state: str | None
    active_state: str | None
    sub_state: str | None
    result: str | None
    since_raw: str | None
    main_pid: int | None
    main_process: str | None
    triggered_by: tuple[str, ...]
    journal: tuple[JournalLine, ...]


@dataclass(frozen=True, slots=True)
class FmOption:
    """A `<name> = <value>` startup option line (value None when printed empty)."""

    name: str
    value: str | None


@dataclass(frozen=True, slots=True)
class FmSwitch:
    """An NVSwitch from the startup dump."""

    index: int
    physical_id: int
    bdf: str
    enabled_link_mask: str
    arch_type: int
    uuid: str


@dataclass(frozen=True, slots=True)
class FmGpu:
    """A GPU registered with the fabric (NVLink inband probe)."""

    fid: int
    physical_id: int
    bdf: str
    discovered_link_mask: str
    enabled_link_mask: str
    uuid: str


@dataclass(frozen=True, slots=True)
class FmSession:
    """One Fabric Manager start (`Fabric Manager Log initializing at:` up to the next)."""

    started_raw: str | None
    started_iso: str | None
    version: str | None
    options: tuple[FmOption, ...]
    topology: str | None
    expected_switches: int | None
    expected_gpus: int | None
    switches: tuple[FmSwitch, ...]
    gpus: tuple[FmGpu, ...]
    routing_configured: bool


@dataclass(frozen=True, slots=True)
class LogEntry:
    """An ERROR/FATAL/WARNING entry that is not an NVSwitch error."""

    timestamp_iso: str | None
    level: str
    message: str


@dataclass(frozen=True, slots=True)
class FabricManagerLog:
    """Sessions in file order (the first has no start when the file begins mid-session)."""

    sessions: tuple[FmSession, ...]
    nvswitch_errors: tuple[NvswitchError, ...]
    problems: tuple[LogEntry, ...]
    entries: int


def _lines(text: str, tool: str) -> list[str]:
    if "\x00" in text:
        raise ParseError(tool, "binary data (NUL bytes) in output")
    return [_ANSI.sub("", ln).rstrip() for ln in text.replace("\r\n", "\n").split("\n")]


def _nvswitch_error(msg: str, cut: bool, where: str, tool: str) -> NvswitchError | None:
    """The NVSwitch error a fabric manager message reports, if any; None for other messages."""
    if xm := _SW_ERROR.search(msg):
        return NvswitchError(
            None, xm["sev"] == "fatal", int(xm["code"]), int(xm["fid"]),
            _bdf(xm["bdf"], where, tool), int(xm["phys"]), int(xm["port"]),
        )  # fmt: skip
    if not msg.startswith("detected NVSwitch"):
        return None
    # A clipped journal line keeps its head: severity and code still judge it.
    if cut and (hm := _SW_ERROR_HEAD.search(msg)):
        return NvswitchError(None, hm["sev"] == "fatal", int(hm["code"]), None, None, None, None)
    raise ParseError(tool, f"{where}: malformed NVSwitch error (cut?): {msg[:80]!r}")


def _journal_line(jm: re.Match[str]) -> JournalLine:
    msg = jm["msg"]
    # systemctl clips lines at the terminal width and marks that with `>` (corpus:
    # systemctl-status-nvidia-fabricmanager__h100...).
    cut = msg.endswith(">")
    text = msg[:-1] if cut else msg
    return JournalLine(
        jm["ts"], jm["ident"], int(jm["pid"]) if jm["pid"] else None, text, cut,
        _nvswitch_error(text, cut, f"journal line {jm['ts']}", STATUS_TOOL),
    )  # fmt: skip


def parse_fabricmanager_status(text: str) -> FabricManagerStatus:
    """Parse `systemctl status nvidia-fabricmanager[.service]` (incl. 'could not be found')."""
    lines = [ln for ln in _lines(text, STATUS_TOOL) if ln.strip()]
    if not lines:
        raise ParseError(STATUS_TOOL, "empty output")
    if nf := _NOT_FOUND.match(lines[0].strip()):
        return FabricManagerStatus(
            nf["unit"], None, "not-found", None, None, None, None, None, None, None, None, (), ()
        )
    head = _UNIT.match(lines[0])
    if head is None:
        raise ParseError(STATUS_TOOL, f"no unit header line: {lines[0][:80]!r}")
    props: dict[str, str] = {}
    journal: list[JournalLine] = []
    for line in lines[1:]:
        if jm := _JOURNAL.match(line):
            journal.append(_journal_line(jm))
        elif (pm := _PROP.match(line)) and pm["key"] not in props:
            props[pm["key"]] = pm["value"].strip()
    loaded = _LOADED.match(props.get("Loaded", ""))
    if loaded is None or loaded["state"] not in _LOAD_STATES:
        raise ParseError(STATUS_TOOL, "no readable 'Loaded:' line")
    detail = [p.strip() for p in (loaded["detail"] or "").split(";")]
    has_file = loaded["state"] == "loaded" and detail[0].startswith("/")
    active = _ACTIVE.match(props.get("Active", ""))
    if active and active["state"] not in _ACTIVE_STATES:
        active = None
    if loaded["state"] == "loaded" and active is None:
        raise ParseError(STATUS_TOOL, "unit loaded but no readable 'Active:' line (cut?)")
    sub = active["sub"] if active else None
    if active and (active["state"], sub) == ("active", "running") and "CGroup" not in props:
        # A running service always gets its CGroup line; without it the output was cut.
        raise ParseError(STATUS_TOOL, "running unit but no 'CGroup:' line: output truncated")
    pid = _MAIN_PID.match(props.get("Main PID", ""))
    triggered = props.get("TriggeredBy", "")
    return FabricManagerStatus(
        unit=head["unit"],
        description=head["desc"],
        load_state=loaded["state"],
        unit_file=detail[0] if has_file else None,
        unit_file_state=detail[1] if has_file and len(detail) > 1 else None,
        active_state=active["state"] if active else None,
        # `failed (Result: exit-code)` puts the result where other states put the sub-state.
        sub_state=sub if sub and not sub.startswith("Result:") else None,
        result=sub.removeprefix("Result:").strip() if sub and sub.startswith("Result:") else None,
        since_raw=active["since"] if active else None,
        main_pid=int(pid["pid"]) if pid else None,
        main_process=pid["name"] if pid else None,
        triggered_by=tuple(
            t for t in re.split(r"\s+", re.sub(r"[^\w@.:\s-]", " ", triggered)) if t
        ),
        journal=tuple(journal),
    )


def _fm_time(raw: str) -> str | None:
    try:
        return datetime.strptime(raw, "%b %d %Y %H:%M:%S").isoformat()
    except ValueError:
        return None


@dataclass(slots=True)
class _Session:
    started_raw: str | None
    version: str | None = None
    options: list[FmOption] = field(default_factory=list)
    topology: str | None = None
    expected: tuple[int, int] | None = None
    switches: list[FmSwitch] = field(default_factory=list)
    gpus: list[FmGpu] = field(default_factory=list)
    routed: bool = False
    in_options: bool = False

    def freeze(self) -> FmSession:
        try:
            started = datetime.strptime(self.started_raw or "", "%m/%d/%Y %H:%M:%S.%f")
        except ValueError:
            started = None
        return FmSession(
            self.started_raw,
            started.isoformat() if started else None,
            self.version,
            tuple(self.options),
            self.topology,
            self.expected[0] if self.expected else None,
            self.expected[1] if self.expected else None,
            tuple(self.switches),
            tuple(self.gpus),
            self.routed,
        )


def _bdf(raw: str, where: str, tool: str = LOG_TOOL) -> str:
    bdf = normalize_bdf(raw)
    if bdf is None:
        raise ParseError(tool, f"{where}: unreadable PCI bus id {raw!r}")
    return bdf


def _session_fact(sess: _Session, msg: str, no: int) -> None:
    """Startup facts from one INFO message."""
    if vm := _VERSION.search(msg):
        sess.version, sess.in_options = vm["v"], True
        return
    om = _OPTION.match(msg)
    if sess.in_options and om:
        sess.options.append(FmOption(om["key"].strip(), om["value"].strip() or None))
        return
    sess.in_options = False
    if tm := _TOPOLOGY.search(msg):
        sess.topology = tm["t"].strip()
    elif em := _EXPECTED.search(msg):
        sess.expected = (int(em["s"]), int(em["g"]))
    elif gm := _GPU.search(msg):
        sess.gpus.append(
            FmGpu(
                int(gm["fid"]), int(gm["phys"]), _bdf(gm["bdf"], f"line {no}"),
                gm["disc"].lower(), gm["en"].lower(), gm["uuid"],
            )
        )  # fmt: skip
    elif _ROUTED in msg:
        sess.routed = True


def parse_fabricmanager_log(text: str) -> FabricManagerLog:
    """Parse /var/log/fabricmanager.log: sessions, NVSwitch errors, other ERROR entries."""
    sessions: list[_Session] = []
    errors: list[NvswitchError] = []
    problems: list[LogEntry] = []
    entries = 0
    for no, line in enumerate(_lines(text, LOG_TOOL), 1):
        if not line.strip():
            continue
        if sm := _SESSION.match(line):
            sessions.append(_Session(sm["at"].strip()))
            continue
        em = _ENTRY.match(line)
        if em is None:
            if _ENTRY_START.match(line):
                raise ParseError(LOG_TOOL, f"line {no}: malformed entry (cut?): {line[:80]!r}")
            if line.lstrip().startswith("Index:"):
                # The NVSwitch dump prints one indented continuation line per switch.
                sw = _SWITCH.match(line.strip())
                if sw is None or not sessions:
                    raise ParseError(LOG_TOOL, f"line {no}: malformed NVSwitch line: {line[:80]!r}")
                sessions[-1].switches.append(
                    FmSwitch(
                        int(sw["idx"]), int(sw["phys"]), _bdf(sw["bdf"], f"line {no}"),
                        sw["mask"].lower(), int(sw["arch"]), sw["uuid"],
                    )
                )  # fmt: skip
            elif entries == 0:
                raise ParseError(
                    LOG_TOOL, f"line {no}: not a fabric manager log line: {line[:80]!r}"
                )
            continue  # other continuation text (inband message payloads, a lone '.')
        entries += 1
        if not sessions:
            sessions.append(_Session(None))
        level, msg, ts = em["level"], em["msg"].strip(), _fm_time(em["ts"])
        if err := _nvswitch_error(msg, False, f"line {no}", LOG_TOOL):
            errors.append(replace(err, timestamp_iso=ts))
        elif level in ("ERROR", "FATAL", "WARNING", "WARN"):
            problems.append(LogEntry(ts, level, msg))
        else:
            _session_fact(sessions[-1], msg, no)
    if entries == 0:
        raise ParseError(LOG_TOOL, "no '[<time>] [<LEVEL>] [tid N]' entries")
    return FabricManagerLog(
        tuple(s.freeze() for s in sessions), tuple(errors), tuple(problems), entries
    )
