"""A simulated node's files over real sshd, as any SSH client sees them: `ssh node grep ...`
reads the node's /sys like a real node's, wrong globs included (issue #8)."""

from __future__ import annotations

import subprocess

import pytest

from tests.integration.conftest import base_model

pytestmark = pytest.mark.integration

IB = "/sys/class/infiniband"


def test_plain_ssh_reads_the_nodes_sysfs(sim_fleet):
    fleet = sim_fleet(base_model(2, faults={"gpu002": [{"hca_port_hdr": "mlx5_1"}]}))
    cfg = str(fleet.fleet.root / "ssh_config")

    def ssh(node: str, cmd: str) -> tuple[int, str, str]:
        p = subprocess.run(
            ["ssh", "-F", cfg, node, cmd], capture_output=True, text=True, timeout=60
        )
        return p.returncode, p.stdout, p.stderr

    rate = "ports/1/rate"
    assert ssh("gpu002", f"grep -H -r . {IB}/mlx5_[0-2]/{rate}") == (
        0,
        f"{IB}/mlx5_0/{rate}:400 Gb/sec (4X NDR)\n"
        f"{IB}/mlx5_1/{rate}:200 Gb/sec (4X HDR)\n"
        f"{IB}/mlx5_2/{rate}:400 Gb/sec (4X NDR)\n",
        "",
    )
    assert ssh("gpu001", f"cat {IB}/mlx5_1/{rate}") == (0, "400 Gb/sec (4X NDR)\n", "")
    wrong = f"{IB}/*/port/*/state"
    assert ssh("gpu001", f"grep -H -r . {wrong}") == (
        2,
        "",
        f"grep: {wrong}: No such file or directory\n",
    )
