"""What one node's load left, read through the parsers into the facts the checks judge.

Each process's output is usable or not, and why not (it did not start, timed out, was cut at
the output cap, exited non-zero without a result, or printed what its parser does not
understand): the checks turn a reason into an ERROR, never a pass. The sampler is killed by
design once the load is over; its `killed` is not a failure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from nodegate.core.errors import ParseError
from nodegate.framework.active.campaign import Execution, Side
from nodegate.parsers.dcgm import DcgmDiag
from nodegate.parsers.dcgm_json import parse_dcgmi_diag_json
from nodegate.parsers.journalctl import parse_kernel_window
from nodegate.parsers.kernel_log import XidEvent
from nodegate.parsers.nvbandwidth import NvbRun, parse_nvbandwidth
from nodegate.parsers.nvsmi_csv import CsvSample, parse_query_gpu_csv
from nodegate.parsers.pci import normalize_bdf
from nodegate.parsers.topo import TopoMatrix, parse_topo_matrix
from nodegate.stages.gpu_load.commands import (
    DCGM,
    FIELDS,
    KERNEL_LOG,
    NVBANDWIDTH,
    SAMPLER,
    TOPOLOGY,
)
from nodegate.stages.gpu_load.profile import GpuLoadProfile
from nodegate.transport.process import ProcessResult

T = TypeVar("T")
NOT_INSTALLED = 127
DCGM_TEST_FAILED = 226  # dcgmi diag: a test failed, the document says which (pcie_gpu too)


@dataclass(frozen=True, slots=True)
class Gpu:
    """A GPU as the sampler named it."""

    index: int
    bdf: str | None
    serial: str | None

    @property
    def name(self) -> str:
        """`GPU3 0000:9b:00.0 serial 1654922003713` (as the pcie_gpu stage names it)."""
        parts = [f"GPU{self.index}", self.bdf or "bdf?"]
        if self.serial:
            parts.append(f"serial {self.serial}")
        return " ".join(parts)


@dataclass(frozen=True, slots=True)
class LoadFacts:
    """Everything the gpu_load checks judge on one node; `errors`: role -> why its part is
    None; `refs`: role -> its evidence reference."""

    node: str
    gpus: tuple[Gpu, ...]
    samples: tuple[CsvSample, ...] | None
    nvbandwidth: NvbRun | None
    dcgm: DcgmDiag | None
    xids: tuple[XidEvent, ...] | None
    topology: TopoMatrix | None  # None: placement is not named (its reason in errors)
    errors: Mapping[str, str]
    refs: Mapping[str, str]

    def why(self, role: str) -> str:
        return self.errors.get(role, f"no usable output of {role}")

    def evidence(self, *roles: str) -> tuple[str, ...]:
        return tuple(self.refs[r] for r in roles if r in self.refs)

    def gpu(self, index: int) -> Gpu:
        return next((g for g in self.gpus if g.index == index), Gpu(index, None, None))

    def placement(self, index: int) -> tuple[int | None, str | None, tuple[str, ...]]:
        """(NUMA node, CPU affinity, NICs on the GPU's own PCIe switch) from `topo -m`."""
        t = self.topology
        row = None if t is None else next((r for r in t.rows if r.device == f"GPU{index}"), None)
        if t is None or row is None:
            return None, None, ()
        nics = tuple(t.nic_names.get(d, d) for d, k in row.links.items() if k == "PIX")
        return row.numa_affinity, row.cpu_affinity, nics

    def samples_of(self, index: int) -> list[CsvSample]:
        return [s for s in self.samples or () if s.text("index") == str(index)]


def _failure(side: Side | None, role: str, ok_killed: bool = False) -> str | None:
    """Why a side's output cannot be read at all (None: read it)."""
    if side is None:
        return f"{role} did not run"
    r = side.result
    if r is None:
        return side.detail or f"{role} did not start"
    if r.lost:
        return r.lost
    if r.overflow:
        return f"{role}: {r.overflow}"
    if r.timed_out and not (ok_killed and r.killed):
        return f"{role} killed at its deadline after {r.duration_s:g} s"
    if r.rc == NOT_INSTALLED:
        return f"absent: `{side.cmd}` exited 127 ({_first(r)})"
    return None


def _first(r: ProcessResult) -> str:
    return (r.stderr.strip().splitlines() or r.stdout.strip().splitlines() or ["no output"])[0][
        :200
    ]


def _parse(
    side: Side | None,
    role: str,
    fn: Callable[[str], T],
    errors: dict[str, str],
    ok_rcs: tuple[int, ...] = (0,),
    ok_killed: bool = False,
) -> T | None:
    why = _failure(side, role, ok_killed)
    if why is not None:
        errors[role] = why
        return None
    assert side is not None and side.result is not None
    r = side.result
    try:
        got = fn(r.stdout)
    except ParseError as exc:
        rc = "" if r.rc in ok_rcs or r.rc is None else f" (exited {r.rc}: {_first(r)})"
        errors[role] = f"unrecognized output of `{side.cmd}`{rc}: {exc.reason}"
        return None
    if r.rc not in ok_rcs and not (ok_killed and r.killed):
        errors[role] = f"`{side.cmd}` exited {r.rc}: {_first(r)}"
        return None
    return got


def read_load(
    node: str, run: Execution, prof: GpuLoadProfile, refs: Mapping[str, str]
) -> LoadFacts:
    """The node's facts from its sides; an orchestration error (`run.error`) is every part's."""
    by_role = {s.role: s for s in run.sides}
    errors: dict[str, str] = {}
    sampler = by_role.get(SAMPLER)
    samples = None
    if sampler is not None and sampler.result is not None and sampler.detail:
        # The sampler stopped before the load ended: what it missed cannot pass.
        errors[SAMPLER] = sampler.detail
    else:
        csv = _parse(
            sampler,
            SAMPLER,
            lambda t: parse_query_gpu_csv(t, FIELDS),
            errors,
            ok_rcs=(0,),
            ok_killed=True,
        )
        samples = csv.samples if csv is not None else None
    if samples is not None and not samples:
        errors[SAMPLER], samples = "the sampler printed its header but no sample", None
    nvb = None
    if prof.run.testcases:
        tcs = prof.run.testcases
        nvb = _parse(
            by_role.get(NVBANDWIDTH), NVBANDWIDTH, lambda t: parse_nvbandwidth(t, tcs), errors
        )
    dcgm = None
    if prof.run.dcgm_level is not None:
        dcgm = _parse(
            by_role.get(DCGM), DCGM, parse_dcgmi_diag_json, errors, ok_rcs=(0, DCGM_TEST_FAILED)
        )
    klog = _parse(by_role.get(KERNEL_LOG), KERNEL_LOG, parse_kernel_window, errors)
    topo = _parse(by_role.get(TOPOLOGY), TOPOLOGY, parse_topo_matrix, errors)
    if run.error is not None:
        for role in (TOPOLOGY, SAMPLER, NVBANDWIDTH, DCGM, KERNEL_LOG):
            errors.setdefault(role, run.error)
    return LoadFacts(
        node=node,
        gpus=_gpus(samples),
        samples=samples,
        nvbandwidth=nvb,
        dcgm=dcgm,
        xids=None if klog is None else klog.xids,
        topology=topo,
        errors=errors,
        refs=refs,
    )


def _gpus(samples: tuple[CsvSample, ...] | None) -> tuple[Gpu, ...]:
    seen: dict[int, Gpu] = {}
    for s in samples or ():
        raw = s.text("index")
        if raw is None or not raw.isdigit() or int(raw) in seen:
            continue
        bus = s.text("pci.bus_id")
        seen[int(raw)] = Gpu(int(raw), normalize_bdf(bus) if bus else None, s.text("serial"))
    return tuple(seen[i] for i in sorted(seen))
