"""Stage `hca`: the node's HCAs, their firmware, rail ports, PCIe links, error counters,
GPUDirect RDMA and rail <-> GPU affinity match the profile.

One test per check of the stage's check table (nodegate.stages.hca), one item per node:
`suites/test_hca.py::<test>[<node>]`. Verdicts are computed once per run by the engine;
each item asserts its own. Nothing to edit here: a check is registered in its stage's table.
"""

from nodegate.session.suite import stage_tests

globals().update(stage_tests("hca", __name__))
