"""Stage `reach`: SSH reachable; OS, kernel, NVIDIA driver and OFED versions vs the profile;
fleet uniformity (a node off the fleet majority is flagged even where the profile allows it).
"""

from nodegate.stages.reach.stage import STAGE

__all__ = ["STAGE"]
