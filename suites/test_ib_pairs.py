"""Stage `ib_pairs`: ib_write_bw per rail between planned node pairs, bad node localized.

One test per check of the stage's check table (nodegate.stages.ib_pairs), one item per node:
`suites/test_ib_pairs.py::<test>[<node>]`. Verdicts are computed once per run by the engine;
each item asserts its own. Nothing to edit here: a check is registered in its stage's table.
"""

from nodegate.session.suite import stage_tests

globals().update(stage_tests("ib_pairs", __name__))
