"""Stage `pcie_gpu`: GPUs, their PCIe links, memory health, Xid, NVLink, fabric and DCGM.

Each test is one check on one node (`test_pcie_gpu_width[gpu017]`); verdicts (one per GPU where
it applies) are computed once per run by the engine (see nodegate.stages.pcie_gpu).
"""


def test_gpu_count(nodegate_check):
    """gpu.count: nvidia-smi reports the profile's GPU count and lspci shows no GPU it lacks."""
    nodegate_check.assert_pass()


def test_gpu_model(nodegate_check):
    """gpu.model: every GPU's PCI vendor:device id is allowed by the profile."""
    nodegate_check.assert_pass()


def test_gpu_driver(nodegate_check):
    """gpu.driver: the driver nvidia-smi reports is allowed by the profile."""
    nodegate_check.assert_pass()


def test_pcie_gpu_gen(nodegate_check):
    """pcie.gpu.gen: every GPU's PCIe link runs at the profile's PCIe generation."""
    nodegate_check.assert_pass()


def test_pcie_gpu_width(nodegate_check):
    """pcie.gpu.width: every GPU's PCIe link runs at the profile's width (nvidia-smi and lspci)."""
    nodegate_check.assert_pass()


def test_pcie_switch_link(nodegate_check):
    """pcie.switch.link: ports above each GPU run at the profile's gen and width."""
    nodegate_check.assert_pass()


def test_gpu_ecc_mode(nodegate_check):
    """gpu.ecc.mode: ECC is enabled (current and pending) as the profile wants."""
    nodegate_check.assert_pass()


def test_gpu_ecc_uncorrectable(nodegate_check):
    """gpu.ecc.uncorrectable: no volatile uncorrectable ECC error beyond the profile's maximum."""
    nodegate_check.assert_pass()


def test_gpu_row_remap(nodegate_check):
    """gpu.remap: no row remap pending (reset) or failed (RMA)."""
    nodegate_check.assert_pass()


def test_gpu_retired_pages(nodegate_check):
    """gpu.retired_pages: pre-Ampere GPUs: retired pages under NVIDIA's limit, none pending."""
    nodegate_check.assert_pass()


def test_gpu_xid(nodegate_check):
    """gpu.xid: no Xid needing action in the profile's window (per the profile's Xid table)."""
    nodegate_check.assert_pass()


def test_gpu_nvlink(nodegate_check):
    """gpu.nvlink: every GPU has the profile's NVLink count, all active at the profile's speed."""
    nodegate_check.assert_pass()


def test_gpu_fabric(nodegate_check):
    """gpu.fabric: fabric manager running, each GPU fabric Completed/Success."""
    nodegate_check.assert_pass()


def test_gpu_clocks(nodegate_check):
    """gpu.clocks: no failing clock event reason (HW slowdown, thermal, power brake) is active."""
    nodegate_check.assert_pass()


def test_gpu_persistence(nodegate_check):
    """gpu.persistence: persistence mode as the profile wants."""
    nodegate_check.assert_pass()


def test_gpu_dcgm(nodegate_check):
    """gpu.dcgm: dcgmi diag at the profile's level passes every test on every GPU."""
    nodegate_check.assert_pass()
