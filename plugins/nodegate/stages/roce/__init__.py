"""Stage `roce`: RoCE L2/L3 configuration and congestion counters per RoCE rail, and the
fleet's duplicate addresses and majority configuration, against the profile's `roce` section.

`STAGE` is what the registry runs; `roce_transport(profile)` is the typed GID index and traffic
class other stages read (ib_pairs: `ib_write_bw -x/--tclass`; nccl: NCCL_IB_GID_INDEX/TC).
"""

from nodegate.stages.roce.profile import RoceProfile, RoceRail, RoceTransport, roce_transport
from nodegate.stages.roce.stage import STAGE

__all__ = ["STAGE", "RoceProfile", "RoceRail", "RoceTransport", "roce_transport"]
