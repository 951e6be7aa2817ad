"""Stage `fabric`: the InfiniBand fabric from one observer node per subnet: cabling against the
expected topology, switch-side link, errors and XmitWait of each node's cable, partition keys,
and the fabric's own parts (subnet manager, leaf uplinks) as a repair list.

`STAGE` is what the registry runs.
"""

from nodegate.stages.fabric.stage import STAGE

__all__ = ["STAGE"]
