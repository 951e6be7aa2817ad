"""Evidence pages: `raw/<node>/<stage>.html`, one per evidence document of each node whose
evidence the report cites (rejected, or with a waived failure), for a person to read: per
command the command line, rc, duration and its stdout and stderr as preformatted text, each
command under an anchor named by its command id, so that a verdict's
`raw/<node>/<stage>.json#<command>` opens as `raw/<node>/<stage>.html#<command>`.

What a node printed is untrusted: control characters are escaped (`safetext`, tabs and line
breaks kept), then HTML-escaped (jinja2 autoescape). A page is bounded: each stream shows its
first PAGE_HEAD_CHARS and last PAGE_TAIL_CHARS characters and says how many it left out (the
whole output is in the JSON document the page links to).

    >>> write_pages(Path("reports/r1"), ["gpu014"])
    [PosixPath('reports/r1/raw/gpu014/pcie_gpu.html'), ...]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2

from nodegate.core.results import RAW_DIR, REPORT_FILE
from nodegate.core.safetext import printable
from nodegate.reports.html.view import evidence_nodes
from nodegate.transport.evidence import GZ_SUFFIX, evidence_file, open_evidence

TEMPLATE = "evidence.html.j2"
PAGE_SUFFIX = ".html"
# Per stream: an 8-GPU node's `lspci -vvv` is ~200 KB; its head and tail make a page a reader
# scrolls, the JSON document keeps it whole.
PAGE_HEAD_CHARS = 24 * 1024
PAGE_TAIL_CHARS = 8 * 1024


@dataclass(frozen=True, slots=True)
class Stream:
    text: str  # escaped for display (control characters), not yet HTML-escaped
    chars: int  # characters the evidence holds
    omitted: int  # characters left out of the page between head and tail


@dataclass(frozen=True, slots=True)
class CommandView:
    id: str
    cmd: str
    facts: tuple[tuple[str, str], ...]  # (label, value): rc, duration, timed out, ...
    stdout: Stream
    stderr: Stream
    peers: tuple[tuple[str, str], ...]  # (label, href) of the test's other processes


@dataclass(frozen=True, slots=True)
class PageView:
    node: str
    stage: str
    json_name: str  # the document's file, beside the page
    facts: tuple[tuple[str, str], ...]
    commands: tuple[CommandView, ...]


def shown_text(text: str) -> str:
    """Node text for a <pre>: line breaks and tabs kept, every other control character
    escaped (`\\x1b`, `\\u202e`)."""
    return "\n".join("\t".join(printable(p) for p in line.split("\t")) for line in text.split("\n"))


def bounded(text: str, head: int = PAGE_HEAD_CHARS, tail: int = PAGE_TAIL_CHARS) -> Stream:
    """The stream as the page shows it: whole when short, else its head and tail."""
    if len(text) <= head + tail:
        return Stream(shown_text(text), len(text), 0)
    omitted = len(text) - head - tail
    cut = f"\n[... nodegate: {omitted} characters left out of this page: the JSON has them ...]\n"
    return Stream(shown_text(text[:head]) + cut + shown_text(text[-tail:]), len(text), omitted)


def page_name(document: str) -> str:
    """`pcie_gpu.json` or `pcie_gpu.json.gz` -> `pcie_gpu.html`."""
    return document.removesuffix(GZ_SUFFIX).removesuffix(".json") + PAGE_SUFFIX


def page_ref(ref: str) -> str:
    """An evidence reference as its page's: `raw/n/s.json#c` -> `raw/n/s.html#c`."""
    path, sep, cmd = ref.partition("#")
    head, _, name = path.rpartition("/")
    return f"{head}/{page_name(name)}{sep}{cmd}" if head else f"{page_name(name)}{sep}{cmd}"


def _seconds(value: Any) -> str:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return f"{value:.3f} s" if number else ""


def _facts(pairs: Iterable[tuple[str, Any]]) -> tuple[tuple[str, str], ...]:
    return tuple((k, str(v)) for k, v in pairs if v not in (None, "", [], {}))


def command_view(cid: str, c: Mapping[str, Any], link: Callable[[str], str]) -> CommandView:
    rnd = c.get("round") or {}
    facts = _facts(
        [
            ("rc", "none (did not exit)" if c.get("rc") is None else c.get("rc")),
            ("duration", _seconds(c.get("duration_s"))),
            ("timed out", "yes" if c.get("timed_out") else None),
            ("killed", "yes" if c.get("killed") else None),
            ("truncated", c.get("truncated")),
            ("not started", "yes" if c.get("started") is False else None),
            ("detail", c.get("detail")),
            ("role", c.get("role")),
            ("round", rnd.get("label") if isinstance(rnd, Mapping) else None),
            ("pid", c.get("pid")),
        ]
    )
    peers = tuple((str(p), link(str(p))) for p in c.get("peers") or ())
    return CommandView(
        cid,
        shown_text(str(c.get("cmd", ""))),
        facts,
        bounded(str(c.get("stdout") or "")),
        bounded(str(c.get("stderr") or "")),
        peers,
    )


def page_view(doc: Mapping[str, Any], json_name: str, link: Callable[[str], str]) -> PageView:
    facts = _facts(
        (k, doc.get(k)) for k in ("kind", "transport", "captured_at", "reach", "detail", "address")
    )
    if isinstance(doc.get("duration_s"), int | float):
        facts += (("session duration", _seconds(doc["duration_s"])),)
    given = doc.get("commands")
    commands = tuple(
        command_view(str(cid), c, link)
        for cid, c in (given.items() if isinstance(given, Mapping) else ())
        if isinstance(c, Mapping)
    )
    return PageView(str(doc.get("node", "")), str(doc.get("stage", "")), json_name, facts, commands)


@lru_cache(maxsize=1)
def _template() -> jinja2.Template:
    env = jinja2.Environment(autoescape=True)
    env.filters["t"] = printable
    env.filters["q"] = lambda s: quote(str(s), safe="/#._-")
    text = resources.files("nodegate.reports.html").joinpath(TEMPLATE).read_text("utf-8")
    return env.from_string(text)


def render_page(view: PageView) -> str:
    return _template().render(p=view, report=f"../../{REPORT_FILE}")


def paged_nodes(doc: Mapping[str, Any]) -> list[str]:
    """The nodes whose evidence has pages: admission.json's `evidence.expanded`, or every
    cited node for a document written before the budget."""
    section = doc.get("evidence")
    if isinstance(section, Mapping) and isinstance(section.get("expanded"), list):
        return [str(n) for n in section["expanded"]]
    return evidence_nodes(doc)


def write_pages(run_dir: Path, nodes: Iterable[str]) -> list[Path]:
    """Write a page beside each evidence document of each of `nodes`; the pages written. A
    document that cannot be read gets no page (its JSON link in report.html stays)."""
    raw = run_dir / RAW_DIR
    wanted = sorted(set(nodes))
    shown = set(wanted)

    def link(ref: str) -> str:  # a peer's reference, from a page in raw/<node>/
        path, sep, cmd = ref.partition("#")
        parts = path.split("/")
        if len(parts) != 3 or parts[0] != RAW_DIR:
            return quote(ref, safe="/#._-")
        if parts[1] in shown:
            return quote(f"../{parts[1]}/{page_name(parts[2])}{sep}{cmd}", safe="/#._-")
        found = evidence_file(raw / parts[1] / parts[2])
        return quote(f"../{parts[1]}/{found.name if found else parts[2]}", safe="/#._-")

    out = []
    for node in wanted:
        d = raw / node
        if not d.is_dir():
            continue
        names = {p.name.removesuffix(GZ_SUFFIX) for p in d.iterdir() if ".json" in p.name}
        for name in sorted(n for n in names if n.endswith(".json") and not n.startswith(".")):
            found = evidence_file(d / name)
            if found is None:
                continue
            try:
                doc = open_evidence(d / name)
            except (OSError, ValueError):
                continue
            if not isinstance(doc, Mapping):  # not an evidence document: its JSON says so
                continue
            page = d / page_name(name)
            tmp = page.with_name(f".{page.name}.tmp")
            tmp.write_text(render_page(page_view(doc, found.name, link)), encoding="utf-8")
            tmp.replace(page)
            out.append(page)
    return out
