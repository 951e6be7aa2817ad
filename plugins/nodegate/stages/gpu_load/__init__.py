"""Stage `gpu_load` (active, node-local): every node's GPUs under load at once, bounded by
the channel limit: nvbandwidth copies, DCGM stress plugins, telemetry sampled under load."""

from nodegate.stages.gpu_load.stage import STAGE, GpuLoadStage

__all__ = ["STAGE", "GpuLoadStage"]
