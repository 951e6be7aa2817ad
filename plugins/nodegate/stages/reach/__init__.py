"""Stage `reach`: SSH reachable; OS, kernel, NVIDIA driver and OFED versions vs the profile;
fleet uniformity (a node off the fleet majority is flagged even where the profile allows it).
`SESSION_CHECK`: the check a node must pass to take part in any later stage.
"""

from nodegate.stages.reach.checks import SSH as SESSION_CHECK
from nodegate.stages.reach.stage import STAGE

__all__ = ["SESSION_CHECK", "STAGE"]
