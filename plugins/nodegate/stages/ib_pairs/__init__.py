"""Stage `ib_pairs` (active): ib_write_bw per rail between planned node pairs, bad node and
rail localized in at most three rounds, on the active-stage skeleton
(`nodegate.framework.active`)."""

from nodegate.stages.ib_pairs.stage import STAGE, IbPairsStage

__all__ = ["STAGE", "IbPairsStage"]
