"""Stage `traffic` (active): incast k->1 with a victim flow and bisection across the spine, per
rail, with ib_write_bw in duration mode; fairness, the victim and the RoCE congestion counters
as criteria; blame on a node's rail or on a switch and its uplinks (`nodegate.framework.active`)."""

from nodegate.stages.traffic.stage import STAGE, TrafficStage

__all__ = ["STAGE", "TrafficStage"]
