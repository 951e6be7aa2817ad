"""Stage `nccl` (active): NCCL all-reduce (nccl-tests all_reduce_perf) per node, over the whole
set, and bad-node localization in few rounds, launched by mpirun or srun."""

from nodegate.stages.nccl.stage import STAGE, NcclStage

__all__ = ["STAGE", "NcclStage"]
