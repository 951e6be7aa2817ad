"""Stage `traffic`: incast, victim and bisection per rail under load, the part to blame named.

One test per check of the stage's check table (nodegate.stages.traffic), one item per node:
`suites/test_traffic.py::<test>[<node>]`. Verdicts are computed once per run by the engine;
each item asserts its own. Nothing to edit here: a check is registered in its stage's table.
"""

from nodegate.session.suite import stage_tests

globals().update(stage_tests("traffic", __name__))
