"""Stage `ib_pairs` pieces: the pair planner and bad-node localization (pure), orchestration."""
