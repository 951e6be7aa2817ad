"""Facts of the `hca` stage for one node, read from its session through nodegate.parsers.

Pure data plus the reader that fills it; unit tests build HcaFacts with `build_facts`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TypeVar

from nodegate.core.errors import ParseError
from nodegate.core.values import NodeOutcome, Reach
from nodegate.framework.stage import OutcomeReader
from nodegate.parsers.ib_pci import IbPciLink, parse_ib_pci
from nodegate.parsers.ib_sysfs import IbSysfs, IbSysfsDevice, parse_ib_sysfs
from nodegate.parsers.mlxlink import MlxlinkReport, parse_mlxlink_json
from nodegate.parsers.module_state import parse_module_initstate
from nodegate.parsers.reach import parse_nvidia_version, parse_uname_r
from nodegate.parsers.topo import TopoMatrix, parse_topo_matrix
from nodegate.stages.hca.commands import (
    DRIVER,
    GREP_OK_RCS,
    KERNEL,
    MLXLINK_PREFIX,
    NO_DEVICES,
    PCI,
    PEERMEM,
    SYSFS,
    SYSFS_AGAIN,
    TOPO,
)

T = TypeVar("T")


@dataclass(frozen=True)
class HcaFacts:
    """Everything parsed for one node; a None fact has its reason in `errors[cmd id]`."""

    node: str
    sysfs: IbSysfs | None
    pci: Mapping[str, IbPciLink]
    sysfs_again: IbSysfs | None
    topo: TopoMatrix | None
    peermem_live: bool | None
    driver_open_module: bool | None
    kernel: str | None
    mlxlink: Mapping[str, MlxlinkReport] = field(default_factory=dict)  # command id -> report
    errors: Mapping[str, str] = field(default_factory=dict)
    evidence: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def ev(self, *cmd_ids: str) -> tuple[str, ...]:
        return tuple(e for c in cmd_ids for e in self.evidence.get(c, ()))

    def device(self, name: str) -> IbSysfsDevice | None:
        if self.sysfs is None:
            return None
        return next((d for d in self.sysfs.devices if d.name == name), None)


class HcaReader(OutcomeReader):
    """OutcomeReader plus grep listings, whose exit codes 1 and 2 still carry lines."""

    def listing(self, cmd_id: str, parser: Callable[[str], T]) -> tuple[T | None, str]:
        """(parsed listing, its text); (None, "") with the reason in `errors` when unusable."""
        r = self.result(cmd_id)
        if r is None or r.timed_out or r.rc not in GREP_OK_RCS:
            return self.parse(cmd_id, parser), ""  # records the reason
        if not r.stdout.strip():
            self.errors[cmd_id] = f"{NO_DEVICES} (`grep` printed nothing, rc {r.rc})"
            return None, ""
        probe = OutcomeReader(
            self.stage, NodeOutcome(self.outcome.node, Reach.OK, {cmd_id: replace(r, rc=0)})
        )
        parsed = probe.parse(cmd_id, parser)
        self.errors.update(probe.errors)
        return parsed, r.stdout

    def parse_part(self, key: str, text: str, parser: Callable[[str], T], what: str) -> T | None:
        """Another parser over text already read (`what` names it in the reason)."""
        try:
            return parser(text)
        except ParseError as exc:
            self.errors[key] = f"unrecognized {what}: {exc.reason}"
            return None


def build_facts(out: NodeOutcome) -> HcaFacts:
    """Parse one node's session into HcaFacts (failures recorded, never raised)."""
    f = HcaReader("hca", out)
    sysfs, text = f.listing(SYSFS, parse_ib_sysfs)
    pci: Mapping[str, IbPciLink] = {}
    if sysfs is not None:
        pci = f.parse_part(PCI, text, parse_ib_pci, "PCI attributes in the sysfs listing") or {}
    again, _ = f.listing(SYSFS_AGAIN, parse_ib_sysfs)
    topo = f.parse(TOPO, parse_topo_matrix, absent_rcs=(127,))
    peer = f.parse(PEERMEM, parse_module_initstate, absent_rcs=(1,))
    drv = f.parse(DRIVER, parse_nvidia_version, absent_rcs=(1,))
    kernel = f.parse(KERNEL, parse_uname_r)
    links = {}
    for cid in out.results:
        if cid.startswith(MLXLINK_PREFIX):
            rep = f.parse(cid, parse_mlxlink_json, absent_rcs=(127,))
            if rep is not None:
                links[cid] = rep
    return HcaFacts(
        node=out.node,
        sysfs=sysfs,
        pci=pci,
        sysfs_again=again,
        topo=topo,
        peermem_live=peer if peer is not None else (False if f.absent(PEERMEM) else None),
        driver_open_module=None if drv is None else drv.open_module,
        kernel=kernel,
        mlxlink=links,
        errors=dict(f.errors),
        evidence={c: f.evidence(c) for c in out.results},
    )
