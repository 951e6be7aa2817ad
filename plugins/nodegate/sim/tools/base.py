"""What a simulated tool is (SimTool, Response, Provider) and how it is rendered into a node's
stub scripts and shell functions; the provider modules (one per stage) build on it."""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from nodegate.sim.fleet_model import TOOL_FAULTS, SimNode
from nodegate.sim.nodefs import Entry
from nodegate.sim.tools.hijack import hijacker


@dataclass(frozen=True, slots=True)
class Response:
    stdout: str = ""
    stderr: str = ""
    rc: int = 0


@dataclass(frozen=True, slots=True)
class SimTool:
    """A tool's answers keyed by its argument string (`"$*"`) in the real tool's form.

    `prelude`: POSIX sh run first with the arguments in "$@": it may `set --` them to the form
    the answers are keyed by, or print and `return` (a parse error, or an answer it computes).
    `usage`: what the real tool answers to arguments it rejects. `fallback`: the answer to
    every other argument string (a node without GPUs: "No devices were found", rc 6)."""

    name: str
    answers: Mapping[str, Response]
    fallback: Response | None = None
    prelude: str = ""
    usage: Response | None = None


@dataclass(frozen=True, slots=True)
class Provider:
    """What one stage adds to a simulated node: tools, files under its fake root, faults."""

    name: str
    tools: Callable[[SimNode], Iterable[SimTool]]
    # Files under its fake root, by absolute path (read by the node's cat and grep).
    files: Callable[[SimNode], Mapping[str, Entry]] = field(default=lambda n: {})
    faults: Mapping[str, str] = field(default_factory=dict)
    # Tools that must run for real (servers, clients): name -> stub script, no fast path.
    scripts: Callable[[SimNode], Mapping[str, str]] = field(default=lambda n: {})


# nvidia-smi's answer to arguments it rejects (stdout, rc 2 "a supplied argument or flag is
# invalid", nvidia-smi(1) RETURN VALUE).
NVIDIA_SMI_USAGE = Response(
    "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n", rc=2
)

GARBAGE = "\x1b[31m#!%@ segfault?? 0xdeadbeef\n\x00\x01 ~~~ :: ::\n<<<<<<<< unexpected\n"
FLOOD_LINE = "nodegate-sim flood: a runaway tool writes this line without end"
FLOOD_BYTES = 300 * 1000 * 1000
# A tool that attacks the session it runs in: it walks up its ancestors reading their stdin
# for the rest of the stage script (where `bash -s` would still be reading it), takes the
# nonce, and prints frames in every shape nodegate used, claiming a healthy Ubuntu node.
FORGER = r"""pid=$PPID; rest=
for _ in 1 2 3 4 5 6; do
  rest=$(/usr/bin/timeout 2 /bin/cat "/proc/$pid/fd/0" 2>/dev/null) && [ -n "$rest" ] && break
  pid=$(/usr/bin/cut -d' ' -f4 "/proc/$pid/stat" 2>/dev/null) || break
done
n=$(printf '%s' "$rest" | /bin/grep -o '@@[0-9a-f]\{32\}\|_nf_n=[0-9a-f]\{32\}' |
  /usr/bin/head -n1 | /usr/bin/tr -dc '0-9a-f')
echo "nodegate-sim forge: learnt nonce [$n] from ${#rest} bytes of the script"
if [ -n "$n" ]; then
  body='ID=ubuntu\nVERSION_ID="22.04"\n'
  printf "@@%s F os_release 0 1 2 29 0 -\n$body@@%s DONE\n" "$n" "$n"
  printf "\n@@%s E os_release 0 2\n@@%s DONE\n" "$n" "$n"
fi"""


def bad_arguments(tool: str, rc: int = 2) -> Response:
    """A bad-arguments answer for a tool whose own wording the corpus does not hold."""
    return Response(stderr=f"{tool}: invalid arguments\n", rc=rc)


def getopt_error(tool: str, opt: str, then: str = "") -> str:
    """Shell: GNU getopt's message for bad option `opt` (a shell word: the long option, or
    the letter of a short one), and `then` (a line, e.g. coreutils' "Try ... --help")."""
    t = shlex.quote(tool)
    lines = [
        f"case {opt} in --*) printf \"%s: unrecognized option '%s'\\n\" {t} {opt} >&2 ;;",
        f"  *) printf \"%s: invalid option -- '%s'\\n\" {t} {opt} >&2 ;; esac",
    ]
    if then:
        lines.append(f"printf '%s\\n' {shlex.quote(then)} >&2")
    return "\n".join(lines)


def _faulty(tool: str, node: SimNode) -> bool:
    return any(node.faulty_tool(k, tool) for k in TOOL_FAULTS)


def _case(tool: SimTool) -> list[str]:
    """`case "$*"` over the tool's answers, in a function (hence `return`)."""
    lines = ['case "$*" in']
    for args, resp in sorted(tool.answers.items()):
        lines.append(f"{shlex.quote(args)}) {_emit(resp)};;")
    if tool.fallback is not None:
        lines.append(f"*) {_emit(tool.fallback)};;")
    else:
        bad = tool.usage or bad_arguments(tool.name)
        forms = "; ".join(a or "(no arguments)" for a in sorted(tool.answers)) or "nothing"
        note = (
            "printf 'nodegate-sim: %s: not simulated (answers: %s)\\n' "
            f'{shlex.quote(tool.name)}" $ng_asked" {shlex.quote(forms)} >&2'
        )
        lines.append(f"*) {_emit(bad, note)};;")
    lines.append("esac")
    return lines


def _function(tool: SimTool) -> str:
    prelude = [ln for ln in tool.prelude.splitlines() if ln.strip()]
    body = "\n".join("  " + ln for ln in ['ng_asked="$*"', *prelude, *_case(tool)])
    return f"{function_name(tool.name)}() {{\n{body}\n}}\n"


def function_name(tool: str) -> str:
    return f"ngsim_{tool.replace('-', '_')}"


def answer(tool: SimTool, args: Sequence[str]) -> Response:
    """What the healthy simulated tool answers to `args`: its shell function run by `sh`
    (for tests that judge a stage's outputs without a fleet)."""
    script = f'{_function(tool)}{function_name(tool.name)} "$@"\n'
    p = subprocess.run(
        ["sh", "-s", "--", *args], input=script, capture_output=True, text=True, check=False
    )
    return Response(p.stdout, p.stderr, p.returncode)


def render_tool(tool: SimTool, node: SimNode) -> str:
    """The tool's stub script, first on the simulated node's PATH (faults live here)."""
    lines = ["#!/bin/sh"]
    if node.faulty_tool("missing", tool.name):
        lines.append(f"echo 'sh: 1: {tool.name}: not found' >&2; exit 127")
    elif node.faulty_tool("hang", tool.name):
        lines.append("exec sleep 86400")
    elif node.faulty_tool("garbage", tool.name):
        lines.append(f"printf '%s' {shlex.quote(GARBAGE)}")
    elif node.faulty_tool("flood", tool.name):
        lines.append(f"/usr/bin/yes {shlex.quote(FLOOD_LINE)} | /usr/bin/head -c {FLOOD_BYTES}")
    elif node.faulty_tool("forge", tool.name):
        lines.append(FORGER)
    elif node.faulty_tool("hijack", tool.name):
        lines.append(hijacker(node))
    else:
        lines += [_function(tool).rstrip("\n"), f'{function_name(tool.name)} "$@"', "exit $?"]
    return "\n".join(lines) + "\n"


def render_function(tool: SimTool, node: SimNode) -> str | None:
    """The same answers as a shell function for the in-shell fast path; None for a faulty
    tool, which must go through the real `timeout` and its stub script."""
    if _faulty(tool.name, node):
        return None
    return _function(tool)


def _emit(r: Response, *extra: str) -> str:
    # Outputs are embedded and printed by the builtin printf: no exec per simulated command.
    parts = []
    if r.stdout:
        parts.append(f"printf '%s' {shlex.quote(r.stdout)}")
    if r.stderr:
        parts.append(f"printf '%s' {shlex.quote(r.stderr)} >&2")
    parts += [*extra, f"return {r.rc}"]
    return "; ".join(parts)
