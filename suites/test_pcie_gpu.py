"""Stage `pcie_gpu`: GPUs, their PCIe links, memory health, Xid, NVLink, fabric and DCGM.

One test per check of the stage's check table (nodegate.stages.pcie_gpu), one item per node:
`suites/test_pcie_gpu.py::<test>[<node>]`. Verdicts are computed once per run by the engine;
each item asserts its own. Nothing to edit here: a check is registered in its stage's table.
"""

from nodegate.session.suite import stage_tests

globals().update(stage_tests("pcie_gpu", __name__))
