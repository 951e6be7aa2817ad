"""The remediation vocabulary: what an operator does about a failed check, as data every layer
names (a stage names a class; admission maps checks to classes through the profile's table).
"""

from __future__ import annotations

from collections.abc import Mapping

# Mildest first; the order is also the summary's order.
CLASSES: tuple[str, ...] = (
    "ignore",
    "retest",
    "fix_config",
    "reset_gpu",
    "reboot",
    "reseat_cable",
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
