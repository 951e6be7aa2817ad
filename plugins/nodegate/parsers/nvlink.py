"""Parse `nvidia-smi nvlink -s` / `nvidia-smi nvlink --status` (optionally `-i N`)."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from nodegate.core.errors import ParseError

TOOL = "nvidia-smi nvlink -s"

_GPU = re.compile(r"^GPU (?P<index>\d+): (?P<name>.+?) \(UUID: (?P<uuid>[^)]*)\)$")
# Link lines are indented with spaces or TAB+space (corpus: nvlink-s-i__...-12links.txt).
_LINK = re.compile(
    r"^Link (?P<link>\d+): (?:(?P<speed>\d+(?:\.\d+)?) GB/s|(?P<inactive><inactive>))$"
)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class NvlinkCondition(enum.Enum):
    """What nvidia-smi said about a GPU's NVLinks."""

    REPORTED = "reported"  # per-link lines follow
    ALL_LINKS_INACTIVE = "all_links_inactive"  # NVML refuses: every link is down
    MIG_MODE_NOT_SUPPORTED = "mig_mode_not_supported"  # NVLink not queryable in MIG mode
    NO_NVLINK = "no_nvlink"  # the device has no NVLink (PCIe cards such as L40S)


# Messages printed in place of the link lines, as captured (corpus files named in INDEX.md).
_MESSAGES = {
    "NVML: Unable to retrieve NVLink information as all links are inactive": (
        NvlinkCondition.ALL_LINKS_INACTIVE
    ),
    "Nvlink queries are not supported for Devices in MIG mode": (
        NvlinkCondition.MIG_MODE_NOT_SUPPORTED
    ),
    "Device does not have or support Nvlink": NvlinkCondition.NO_NVLINK,
}


@dataclass(frozen=True, slots=True)
class NvlinkLink:
    """One link: speed in GB/s when up, None and active=False when `<inactive>`."""

    link: int
    active: bool
    speed_gbps: float | None


@dataclass(frozen=True, slots=True)
class NvlinkGpu:
    """One GPU of the status output: its links, or the message printed instead."""

    index: int
    name: str
    uuid: str
    condition: NvlinkCondition
    message: str | None
    links: tuple[NvlinkLink, ...]


@dataclass(frozen=True, slots=True)
class NvlinkStatus:
    """All GPUs listed by `nvidia-smi nvlink -s`, in output order."""

    gpus: tuple[NvlinkGpu, ...]


def parse_nvlink_status(text: str) -> NvlinkStatus:
    """Parse `nvidia-smi nvlink -s` output.

    >>> parse_nvlink_status("GPU 0: NVIDIA L40S (UUID: GPU-1)\\nDevice does not have or "
    ...     "support Nvlink\\n").gpus[0].condition
    <NvlinkCondition.NO_NVLINK: 'no_nvlink'>
    """
    if not text.strip():
        raise ParseError(TOOL, "empty output")
    blocks: list[tuple[re.Match[str], list[str]]] = []
    for raw in _ANSI.sub("", text).replace("\r\n", "\n").split("\n"):
        line = raw.strip()
        if not line:
            continue
        header = _GPU.match(line)
        if header:
            blocks.append((header, []))
        elif not blocks:
            raise ParseError(TOOL, f"expected a 'GPU N: name (UUID: ...)' line, got {line[:60]!r}")
        else:
            blocks[-1][1].append(line)
    gpus = tuple(_gpu(header, lines) for header, lines in blocks)
    _check_counts(gpus)
    return NvlinkStatus(gpus=gpus)


def _gpu(header: re.Match[str], lines: list[str]) -> NvlinkGpu:
    index = int(header.group("index"))
    if len(lines) == 1 and lines[0] in _MESSAGES:
        condition, message = _MESSAGES[lines[0]], lines[0]
        return NvlinkGpu(index, header["name"], header["uuid"], condition, message, ())
    links = []
    for line in lines:
        match = _LINK.match(line)
        if match is None:
            raise ParseError(TOOL, f"GPU {index}: unrecognized line {line[:60]!r}")
        speed = match.group("speed")
        links.append(
            NvlinkLink(
                link=int(match.group("link")),
                active=match.group("inactive") is None,
                speed_gbps=float(speed) if speed is not None else None,
            )
        )
    if not links:
        raise ParseError(TOOL, f"GPU {index}: neither link lines nor a known message")
    if [link.link for link in links] != list(range(len(links))):
        raise ParseError(TOOL, f"GPU {index}: link numbers are not 0..{len(links) - 1} in order")
    return NvlinkGpu(
        index, header["name"], header["uuid"], NvlinkCondition.REPORTED, None, tuple(links)
    )


def _check_counts(gpus: tuple[NvlinkGpu, ...]) -> None:
    """nvidia-smi lists every link of a GPU (down ones as `<inactive>`), so GPUs of one model
    report the same count; a shorter list means the output was cut."""
    counts: dict[str, int] = {}
    for gpu in gpus:
        if gpu.condition is NvlinkCondition.REPORTED:
            expected = counts.setdefault(gpu.name, len(gpu.links))
            if len(gpu.links) != expected:
                raise ParseError(
                    TOOL,
                    f"GPU {gpu.index} has {len(gpu.links)} links, another {gpu.name} {expected}",
                )


ERRORS_TOOL = "nvidia-smi nvlink -e"
# `nvidia-smi nvlink -e` (optionally `-i N`): per link, one `Link N: <Counter>: <value>` line per
# error counter, a blank line between links (corpus: nvidia-smi-nvlink-e__h100-...). The counter
# set depends on the driver and GPU (Replay/Recovery/CRC Errors on the H100 capture), so names are
# kept as printed; a value that is not a number (`N/A`) is None, never 0.
_COUNTER = re.compile(r"^Link (?P<link>\d+): (?P<name>[^:]+?): (?P<value>\S+)$")
_COUNT = re.compile(r"^\d+$")


@dataclass(frozen=True, slots=True)
class NvlinkLinkErrors:
    link: int
    counters: tuple[tuple[str, int | None], ...]  # (name as printed, value), in output order


@dataclass(frozen=True, slots=True)
class NvlinkErrorsGpu:
    index: int
    name: str
    uuid: str
    condition: NvlinkCondition
    message: str | None
    links: tuple[NvlinkLinkErrors, ...]


def parse_nvlink_errors(text: str) -> tuple[NvlinkErrorsGpu, ...]:
    """Parse `nvidia-smi nvlink -e`: every GPU's links and their error counters.

    >>> parse_nvlink_errors("GPU 0: X (UUID: GPU-1)\\n\\t Link 0: CRC Errors: 3\\n")[0].links
    (NvlinkLinkErrors(link=0, counters=(('CRC Errors', 3),)),)
    """
    if not text.strip():
        raise ParseError(ERRORS_TOOL, "empty output")
    blocks: list[tuple[re.Match[str], list[str]]] = []
    for raw in _ANSI.sub("", text).replace("\r\n", "\n").split("\n"):
        line = raw.strip()
        if not line:
            continue
        if header := _GPU.match(line):
            blocks.append((header, []))
        elif not blocks:
            want = "a 'GPU N: name (UUID: ...)' line"
            raise ParseError(ERRORS_TOOL, f"expected {want}, got {line[:60]!r}")
        else:
            blocks[-1][1].append(line)
    return tuple(_errors_gpu(header, lines) for header, lines in blocks)


def _errors_gpu(header: re.Match[str], lines: list[str]) -> NvlinkErrorsGpu:
    index, name, uuid = int(header["index"]), header["name"], header["uuid"]
    if len(lines) == 1 and lines[0] in _MESSAGES:
        return NvlinkErrorsGpu(index, name, uuid, _MESSAGES[lines[0]], lines[0], ())
    links: dict[int, list[tuple[str, int | None]]] = {}
    for line in lines:
        m = _COUNTER.match(line)
        if m is None:
            raise ParseError(ERRORS_TOOL, f"GPU {index}: unrecognized line {line[:60]!r}")
        value = m["value"]
        if not _COUNT.match(value) and value != "N/A":
            raise ParseError(ERRORS_TOOL, f"GPU {index}: counter value {value[:20]!r}")
        counters = links.setdefault(int(m["link"]), [])
        if m["name"] in (n for n, _ in counters):
            raise ParseError(ERRORS_TOOL, f"GPU {index} link {m['link']}: {m['name']} twice")
        counters.append((m["name"], int(value) if _COUNT.match(value) else None))
    if not links:
        raise ParseError(ERRORS_TOOL, f"GPU {index}: neither counter lines nor a known message")
    sizes = {len(c) for c in links.values()}
    if len(sizes) != 1:  # every link prints the same counters: a shorter one was cut
        raise ParseError(ERRORS_TOOL, f"GPU {index}: links print different counter counts")
    got = tuple(NvlinkLinkErrors(k, tuple(v)) for k, v in links.items())
    return NvlinkErrorsGpu(index, name, uuid, NvlinkCondition.REPORTED, None, got)
