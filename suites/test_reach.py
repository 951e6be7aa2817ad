"""Stage `reach`: the node answers over SSH and runs the qualified OS, kernel, driver and OFED.

One test per check of the stage's check table (nodegate.stages.reach), one item per node:
`suites/test_reach.py::<test>[<node>]`. Verdicts are computed once per run by the engine;
each item asserts its own. Nothing to edit here: a check is registered in its stage's table.
"""

from nodegate.session.suite import stage_tests

globals().update(stage_tests("reach", __name__))
