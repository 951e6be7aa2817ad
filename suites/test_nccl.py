"""Stage `nccl`: all_reduce_perf on each node alone, over the whole set, bad node localized.

One test per check of the stage's check table (nodegate.stages.nccl), one item per node:
`suites/test_nccl.py::<test>[<node>]`. Verdicts are computed once per run by the engine;
each item asserts its own. Nothing to edit here: a check is registered in its stage's table.
"""

from nodegate.session.suite import stage_tests

globals().update(stage_tests("nccl", __name__))
