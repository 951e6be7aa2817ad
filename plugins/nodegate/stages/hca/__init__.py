"""Stage `hca`: the node's HCAs, firmware, rail ports, PCIe links, error counters, GPUDirect
RDMA and rail <-> GPU affinity against the profile's `hca` section.

`STAGE` is what the registry runs; `hca_profile(profile).rails` is the typed rail map other
stages read (ib_pairs).
"""

from nodegate.stages.hca.commands import SYSFS_AGAIN_COMMAND, SYSFS_COMMAND
from nodegate.stages.hca.profile import HcaProfile, Rail, hca_profile
from nodegate.stages.hca.stage import STAGE

__all__ = ["STAGE", "SYSFS_AGAIN_COMMAND", "SYSFS_COMMAND", "HcaProfile", "Rail", "hca_profile"]
