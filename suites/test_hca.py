"""Stage `hca`: the node's HCAs, their firmware, rail ports, PCIe links, error counters,
GPUDirect RDMA and rail <-> GPU affinity match the profile.

Each test is one check on one node; verdicts are computed once per run by the engine (see
nodegate.stages.hca), per HCA or per port (`mlx5_4 port 1 (rail 4)`); the test asserts them.
"""


def test_hca_count(nodegate_check):
    """hca.count: every rail HCA is present; other roles (storage, front-end) have their count."""
    nodegate_check.assert_pass()


def test_hca_model(nodegate_check):
    """hca.model: each HCA's PCI id and PSID belong to its role."""
    nodegate_check.assert_pass()


def test_hca_firmware_version(nodegate_check):
    """hca.firmware.version: each HCA's firmware meets the profile's rule for its PSID."""
    nodegate_check.assert_pass()


def test_hca_firmware_uniform(nodegate_check):
    """hca.firmware.uniform: each HCA runs its PSID's fleet majority firmware."""
    nodegate_check.assert_pass()


def test_hca_port_state(nodegate_check):
    """hca.port.state: every rail port is ACTIVE and LinkUp."""
    nodegate_check.assert_pass()


def test_hca_port_width(nodegate_check):
    """hca.port.width: every rail port runs the profile's link width (4X)."""
    nodegate_check.assert_pass()


def test_hca_port_speed(nodegate_check):
    """hca.port.speed: every rail port runs the profile's link speed (NDR)."""
    nodegate_check.assert_pass()


def test_hca_port_rate(nodegate_check):
    """hca.port.rate: every rail port runs the profile's link rate (400 Gb/s)."""
    nodegate_check.assert_pass()


def test_hca_port_link_layer(nodegate_check):
    """hca.port.link_layer: every rail port has the profile's link layer (InfiniBand/Ethernet)."""
    nodegate_check.assert_pass()


def test_hca_pcie_gen(nodegate_check):
    """hca.pcie.gen: each HCA's PCIe link runs its role's generation."""
    nodegate_check.assert_pass()


def test_hca_pcie_width(nodegate_check):
    """hca.pcie.width: each HCA's PCIe link runs its role's width."""
    nodegate_check.assert_pass()


def test_hca_error_counters(nodegate_check):
    """hca.counters.errors: no error counter of a rail port rises over the profile's window."""
    nodegate_check.assert_pass()


def test_hca_link_ber(nodegate_check):
    """hca.link.ber: mlxlink effective/raw BER and transceiver fault flags of each rail port."""
    nodegate_check.assert_pass()


def test_hca_gpudirect(nodegate_check):
    """hca.gpudirect: GPUDirect RDMA is ready (nvidia_peermem or DMA-BUF, per profile)."""
    nodegate_check.assert_pass()


def test_hca_rail_affinity(nodegate_check):
    """hca.rail.affinity: each rail HCA sits on its GPU's PCIe switch and NUMA node."""
    nodegate_check.assert_pass()
