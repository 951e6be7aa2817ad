"""Stage `reach`: the node answers over SSH and runs the qualified OS, kernel, driver and OFED.

Each test is one check on one node (`test_kernel_version[gpu017]`); the verdicts are computed
once per run by the engine (see nodegate.stages.reach), the test states and asserts them.
"""


def test_ssh_reachable(nodegate_check):
    """reach.ssh: an SSH session opens and runs every command of the stage."""
    nodegate_check.assert_pass()


def test_os_release(nodegate_check):
    """reach.os.release: /etc/os-release ID and VERSION_ID are in the profile."""
    nodegate_check.assert_pass()


def test_kernel_version(nodegate_check):
    """reach.kernel.version: `uname -r` is allowed by the profile."""
    nodegate_check.assert_pass()


def test_kernel_uniform(nodegate_check):
    """reach.kernel.uniform: the kernel equals the fleet majority (same profile)."""
    nodegate_check.assert_pass()


def test_driver_version(nodegate_check):
    """reach.driver.version: the NVIDIA kernel module version is allowed by the profile."""
    nodegate_check.assert_pass()


def test_driver_uniform(nodegate_check):
    """reach.driver.uniform: the driver equals the fleet majority (same profile)."""
    nodegate_check.assert_pass()


def test_ofed_version(nodegate_check):
    """reach.ofed.version: `ofed_info -s` is allowed by the profile."""
    nodegate_check.assert_pass()


def test_ofed_uniform(nodegate_check):
    """reach.ofed.uniform: OFED equals the fleet majority (same profile)."""
    nodegate_check.assert_pass()
