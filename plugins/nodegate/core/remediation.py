"""The remediation vocabulary: what an operator does about a failed check, as data every layer
names (a stage names a class; admission maps checks to classes through the profile's table).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# Mildest first; the order is also the summary's order.
CLASSES: tuple[str, ...] = (
    "ignore",
    "retest",
    "fix_config",
    "reset_gpu",
    "reboot",
    "reseat_cable",
    "repair_cooling_power",  # on site: fans, airflow, heatsink, PSU, power-brake wiring
    "rma",
)
DEFAULT_CLASS = "retest"
UNJUDGED_CLASS = "retest"  # ERROR / SKIP / not run: nothing measured
# The Xid/SXid table's actions (profile `pcie_gpu.xid`) as remediation classes.
XID_ACTION_CLASS: Mapping[str, str] = {
    "ignore": "ignore",
    "reset": "reset_gpu",
    "reboot": "reboot",
    "drain_rma": "rma",
}


@dataclass(frozen=True, slots=True)
class ToolFailure:
    """A tool failure the node's own state explains, known by what the tool printed."""

    text: str  # as the tool prints it, found in the command's failure reason
    remediation_class: str
    remediation: str


NVIDIA_DRIVER_FIX = (
    "the NVIDIA kernel module cannot serve the installed NVIDIA libraries (driver updated or "
    "removed without a reload): reload the NVIDIA driver or reboot the node, then requalify"
)
# nvidia-smi prints these on stdout and exits 18 (NVML_ERROR_LIB_RM_VERSION_MISMATCH) or 9
# (NVML_ERROR_DRIVER_NOT_LOADED); whatever the check, nothing GPU-side can be read until then.
TOOL_FAILURES: tuple[ToolFailure, ...] = (
    ToolFailure(
        "Failed to initialize NVML: Driver/library version mismatch", "reboot", NVIDIA_DRIVER_FIX
    ),
    ToolFailure(
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver",
        "reboot",
        NVIDIA_DRIVER_FIX,
    ),
)


def tool_failure(reason: str) -> ToolFailure | None:
    """The known tool failure a command's failure reason shows, if any."""
    return next((t for t in TOOL_FAILURES if t.text in reason), None)
