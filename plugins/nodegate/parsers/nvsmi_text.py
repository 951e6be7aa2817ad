"""Parse `nvidia-smi -q` text (full, `-q -d SECTION`, and quoted/grep fragments).

The indented `Label : value` tree is flattened to snake_case paths, mapped onto the element
paths of `nvidia-smi -q -x`, and built by the same code as the XML parser, so both give the
same facts for the same GPU.
"""

from __future__ import annotations

import functools
import re
import string
from dataclasses import dataclass, field

from nodegate.core.errors import ParseError
from nodegate.parsers.gpu_facts import MigDevice, NvsmiGpu, int_value, text_value
from nodegate.parsers.nvsmi_xml import build_gpu, mig_device

TOOL = "nvidia-smi -q"

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_BANNER = re.compile(r"^=+\s*NVSMI LOG\s*=+$")
# Also PCI domains above 0 (Azure: `GPU 00000001:00:00.0`).
_GPU_HEADER = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])$")
# Label normalization: these characters are dropped, other runs of non-alphanumerics -> `_`.
_DROPPED = re.compile(r"[.\-']")
_NON_WORD = re.compile(r"[^a-z0-9]+")
_LETTERS = frozenset(string.ascii_letters)  # a label starts with one
_TOP_KEYS = {"timestamp", "driver_version", "cuda_version", "attached_gpus"}

_LINK = "pci/pci_gpu_link_info/"
_HIST = "remapped_rows/row_remapper_histogram/row_remapper_histogram_"
# Text label paths whose `-q -x` element path differs (after snake_case).
_ALIASES = {
    "serial_number": "serial",
    "gpu_uuid": "uuid",
    "module_id": "gpu_module_id",
    "platform_info/module_id": "platforminfo/module_id",
    "mig_mode/current": "mig_mode/current_mig",
    "mig_mode/pending": "mig_mode/pending_mig",
    "ecc_mode/current": "ecc_mode/current_ecc",
    "ecc_mode/pending": "ecc_mode/pending_ecc",
    "pci/bus_id": "pci/pci_bus_id",
    "pci/device_id": "pci/pci_device_id",
    "pci/replays_since_reset": "pci/replay_counter",
    "pci/replay_number_rollovers": "pci/replay_rollover_counter",
    "pci/gpu_link_info/pcie_generation/max": _LINK + "pcie_gen/max_link_gen",
    "pci/gpu_link_info/pcie_generation/current": _LINK + "pcie_gen/current_link_gen",
    "pci/gpu_link_info/pcie_generation/device_current": _LINK + "pcie_gen/device_current_link_gen",
    "pci/gpu_link_info/pcie_generation/device_max": _LINK + "pcie_gen/max_device_link_gen",
    "pci/gpu_link_info/pcie_generation/host_max": _LINK + "pcie_gen/max_host_link_gen",
    "pci/gpu_link_info/link_width/max": _LINK + "link_widths/max_link_width",
    "pci/gpu_link_info/link_width/current": _LINK + "link_widths/current_link_width",
    "retired_pages/single_bit_ecc": "retired_pages/multiple_single_bit_retirement/retired_count",
    "retired_pages/double_bit_ecc": "retired_pages/double_bit_retirement/retired_count",
    # Both spellings are printed by real drivers (older: Blacklist).
    "retired_pages/pending_page_blacklist": "retired_pages/pending_blacklist",
    "retired_pages/pending_page_retirement": "retired_pages/pending_retirement",
    "remapped_rows/correctable_error": "remapped_rows/remapped_row_corr",
    "remapped_rows/uncorrectable_error": "remapped_rows/remapped_row_unc",
    "remapped_rows/inactive_correctable_error": "remapped_rows/remapped_row_corr_inactive",
    "remapped_rows/inactive_uncorrectable_error": "remapped_rows/remapped_row_unc_inactive",
    "remapped_rows/pending": "remapped_rows/remapped_row_pending",
    "remapped_rows/remapping_failure_occurred": "remapped_rows/remapped_row_failure",
    **{
        f"remapped_rows/bank_remap_availability_histogram/{k}": _HIST + k
        for k in ("max", "high", "partial", "low", "none")
    },
    "temperature/gpu_current_temp": "temperature/gpu_temp",
    "temperature/gpu_tlimit_temp": "temperature/gpu_temp_tlimit",
    "temperature/gpu_shutdown_temp": "temperature/gpu_temp_max_threshold",
    "temperature/gpu_slowdown_temp": "temperature/gpu_temp_slow_threshold",
    "temperature/gpu_max_operating_temp": "temperature/gpu_temp_max_gpu_threshold",
    "temperature/memory_current_temp": "temperature/memory_temp",
    "temperature/memory_max_operating_temp": "temperature/gpu_temp_max_mem_threshold",
    "temperature/gpu_shutdown_tlimit_temp": "temperature/gpu_temp_max_tlimit_threshold",
    "temperature/gpu_slowdown_tlimit_temp": "temperature/gpu_temp_slow_tlimit_threshold",
    "temperature/gpu_max_operating_tlimit_temp": "temperature/gpu_temp_max_gpu_tlimit_threshold",
    "temperature/memory_max_operating_tlimit_temp": "temperature/gpu_temp_max_mem_tlimit_threshold",
}
# Leaf labels renamed wherever they appear.
_LEAF_ALIASES = {"instantaneous_power_draw": "instant_power_draw", "texture_shared": "texture_shm"}
_MIG_ALIASES = {
    "ecc_errors/volatile/sram_uncorrectable": "ecc_error_count/volatile_count/sram_uncorrectable",
    "shared_fb_memory_usage/total": "fb_memory_usage/total",
}


@dataclass(slots=True)
class _Node:
    key: str
    value: str | None
    line: str
    children: list[_Node] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class NvsmiTextReport:
    """`nvidia-smi -q [-d ...]` text: report-level values and one NvsmiGpu per GPU block.

    `fragment` is True when no `GPU <bus id>` header was present (a quoted/grepped block):
    the single GPU then has no bus id. `messages` keeps unrecognized top-level lines verbatim
    (e.g. per-GPU error lines); `attached_gpus` may exceed len(gpus) (`-i` filters).
    """

    timestamp: str | None
    driver_version: str | None
    cuda_version: str | None
    attached_gpus: int | None
    fragment: bool
    gpus: tuple[NvsmiGpu, ...]
    messages: tuple[str, ...]


def parse_nvsmi_text(text: str) -> NvsmiTextReport:
    """Parse `nvidia-smi -q` text; raises ParseError when nothing nvidia-smi-like is found."""
    roots, banner, dangling = _tree(text)
    top: dict[str, str] = {}
    blocks: list[tuple[str | None, list[_Node]]] = []
    loose: list[_Node] = []
    messages: list[str] = []
    for node in roots:
        header = _GPU_HEADER.match(node.key) if node.value is None else None
        if header:
            blocks.append((header.group(1), node.children))
        elif node.value is not None and _snake(node.key) in _TOP_KEYS:
            top[_snake(node.key)] = node.value
        else:
            loose.append(node)
            if not node.children:
                messages.append(node.line)
    fragment = not blocks
    if fragment:
        blocks = [(None, loose)]
        messages = []
    read = [_block(bus, children) for bus, children in blocks]
    gpus = tuple(_gpu(i, block) for i, block in enumerate(read))
    known = any(_has_facts(gpu) for gpu in gpus)
    if not known and not (banner and (top or not fragment)):
        raise ParseError(TOOL, "no GPU block and no known nvidia-smi -q section found")
    if dangling is not None:
        raise ParseError(TOOL, f"output ends at section label {dangling!r}: truncated")
    _check_complete(read)
    return NvsmiTextReport(
        timestamp=text_value(top.get("timestamp")),
        driver_version=text_value(top.get("driver_version")),
        cuda_version=text_value(top.get("cuda_version")),
        attached_gpus=int_value(top.get("attached_gpus")),
        fragment=fragment,
        gpus=gpus if not fragment or known else (),
        messages=tuple(messages),
    )


def _tree(text: str) -> tuple[list[_Node], bool, str | None]:
    """Indentation tree of `Label : value` lines (section labels have value None), whether
    the NVSMI LOG banner was seen, and the label the text ends on if it opens a section."""
    if not text.strip():
        raise ParseError(TOOL, "empty output")
    if "\x00" in text:
        raise ParseError(TOOL, "binary data (NUL bytes) in output")
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    roots: list[_Node] = []
    stack: list[tuple[int, _Node]] = []
    banner = False
    last: _Node | None = None
    for raw in lines:
        # One pass of str methods per line: a full run is ~4,600 lines per node.
        line = (raw.expandtabs(8) if "\t" in raw else raw).rstrip()
        stripped = line.lstrip()
        # `--` is the separator `grep -C` puts between matches (corpus: -q-grep-fragment).
        if not stripped or stripped == "--":
            continue
        first = stripped[0]
        if first == "=" and _BANNER.match(stripped):
            banner = True
            continue
        if first not in _LETTERS:
            raise ParseError(TOOL, f"unrecognized line: {stripped[:60]!r}")
        indent = len(line) - len(stripped)
        # A label is free text up to the first colon; the value may hold colons (bus ids).
        label, colon, value = stripped.partition(":")
        if not colon or (first == "G" and _GPU_HEADER.match(stripped)):
            node = _Node(stripped, None, stripped)
        else:
            node = _Node(label.strip(), value.strip(), stripped)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        (stack[-1][1].children if stack else roots).append(node)
        if node.value is None:
            stack.append((indent, node))
        last = node
    dangling = last.key if last is not None and last.value is None and not last.children else None
    return roots, banner, dangling


@functools.lru_cache(maxsize=4096)  # bounded: labels come from the node (untrusted)
def _snake(label: str) -> str:
    """`GPU T.Limit Temp` -> `gpu_tlimit_temp`, `SRAM Uncorrectable SEC-DED` -> `..._secded`."""
    cleaned = _DROPPED.sub("", label.lower())
    return _NON_WORD.sub("_", cleaned).strip("_")


@functools.lru_cache(maxsize=4096)
def _leaf(label: str) -> str:
    """A value label's last path element: snake_case, renamed by _LEAF_ALIASES."""
    key = _snake(label)
    return _LEAF_ALIASES.get(key, key)


def _flatten(nodes: list[_Node], prefix: str, out: dict[str, str]) -> None:
    for node in nodes:
        if node.value is not None:
            # _tree never gives a valued node children.
            out.setdefault(prefix + _leaf(node.key), node.value)
        elif node.children:
            _flatten(node.children, prefix + _snake(node.key) + "/", out)


@dataclass(frozen=True, slots=True)
class _Block:
    """One GPU block read once: its flattened labels (MIG devices and processes left out)."""

    bus: str | None
    fields: dict[str, str]
    migs: tuple[MigDevice, ...]
    has_processes: bool


def _block(bus: str | None, children: list[_Node]) -> _Block:
    migs: list[MigDevice] = []
    kept = []
    has_processes = False
    for node in children:
        key = _snake(node.key)
        if key == "mig_device" and node.value is None:
            raw: dict[str, str] = {}
            _flatten(node.children, "", raw)
            migs.append(mig_device({_MIG_ALIASES.get(k, k): v for k, v in raw.items()}))
        elif key == "processes":
            has_processes = True
        else:
            kept.append(node)
    fields: dict[str, str] = {}
    _flatten(kept, "", fields)
    return _Block(bus, fields, tuple(migs), has_processes)


def _gpu(index: int, block: _Block) -> NvsmiGpu:
    mapped = {_ALIASES.get(k, k): v for k, v in block.fields.items()}
    # `MIG Device` blocks follow `MIG Mode`; a block without `MIG Mode` (-d / fragment) says
    # nothing about MIG devices.
    has_mig_mode = "mig_mode/current_mig" in mapped
    return build_gpu(index, block.bus, mapped, block.migs if has_mig_mode else None)


def _has_facts(gpu: NvsmiGpu) -> bool:
    return any(
        value is not None
        for value in (
            gpu.product_name,
            gpu.pcie,
            gpu.clock_event_reasons,
            gpu.ecc,
            gpu.retired_pages,
            gpu.remapped_rows,
            gpu.fabric,
            gpu.persistence_mode,
            gpu.mig_mode,
            gpu.temperature,
            gpu.power,
        )
    )


def _check_complete(blocks: list[_Block]) -> None:
    """Reject output cut short: nvidia-smi prints the same labels for every GPU of a model."""
    first: dict[str | None, set[str]] = {}
    for block in blocks:
        bus = block.bus
        # A `MIG Device : value` line counts as a label of the GPU, not for completeness.
        paths = {p for p in block.fields if p != "mig_device"}
        product = block.fields.get("product_name")
        if "product_name" in paths and not block.has_processes:
            # A full -q block always ends with `Processes` (then `Capabilities` on >= 570).
            raise ParseError(TOOL, f"GPU {bus} block ends before 'Processes': truncated")
        reference = first.setdefault(product, paths)
        if paths != reference:
            missing = sorted(reference - paths)[:3]
            raise ParseError(TOOL, f"GPU {bus} lacks labels its peers have, e.g. {missing}")
        # Aggregate repeats every Volatile counter (plus a threshold flag): fewer means cut.
        volatile = {p[20:] for p in paths if p.startswith("ecc_errors/volatile/")}
        aggregate = {p[21:] for p in paths if p.startswith("ecc_errors/aggregate/")}
        if not volatile <= aggregate:
            raise ParseError(TOOL, f"GPU {bus}: ECC Errors/Aggregate is incomplete: truncated")
