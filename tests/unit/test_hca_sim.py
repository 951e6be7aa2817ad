"""The simulated HCA tools agree with each other: what ibv_devinfo and mlxlink say (parsed by
the real parsers) is what the node's sysfs says, faults included."""

from __future__ import annotations

from pathlib import Path

from nodegate.parsers.ib_sysfs import parse_ib_sysfs
from nodegate.parsers.ibv_devinfo import parse_ibv_devinfo
from nodegate.sim.fleet_model import Fault, SimNode
from nodegate.sim.nodefs import Counter, Symlink
from nodegate.sim.tools import hca_diag
from nodegate.sim.tools.hca import FAULTS, PROVIDER, node_hcas, sysfs_listing
from nodegate.stages.hca import SYSFS_AGAIN_COMMAND, SYSFS_COMMAND

from tests.integration.conftest import base_model
from tests.simnode import build, run_script

IB = "/sys/class/infiniband"
SYSFS_DEV6 = "/sys/devices/pci0000:c7/0000:ca:00.0/infiniband/mlx5_6"

FAULTY = SimNode(
    "gpu007",
    6,
    "127.0.0.7",
    {},
    {"hca": {"firmware": "28.39.1002"}},
    (
        Fault("hca_missing", "mlx5_2"),
        Fault("hca_port_down", "mlx5_3"),
        Fault("hca_port_2x"),
        Fault("hca_old_firmware", "mlx5_5"),
        Fault("hca_symbol_errors", "mlx5_6"),
    ),
)


def test_diagnostics_agree_with_sysfs() -> None:
    devs = node_hcas(FAULTY)
    sysfs = {d.name: d for d in parse_ib_sysfs(sysfs_listing(devs, 0)).devices}
    assert "mlx5_2" not in sysfs and len(sysfs) == 8
    verbs = {d.hca_id: d for d in parse_ibv_devinfo(hca_diag.ibv_devinfo(devs)).devices}
    assert set(verbs) == set(sysfs)
    for name, s in sysfs.items():
        port = s.ports[0]
        assert verbs[name].fw_ver == s.fw_ver
        assert verbs[name].board_id == s.board_id
        assert verbs[name].ports[0].state_code == port.state_code
    assert sysfs["mlx5_5"].fw_ver == "28.37.1014" and sysfs["mlx5_0"].fw_ver == "28.39.1002"
    assert sysfs["mlx5_4"].ports[0].rate.raw == "200 Gb/sec (2X NDR)"


def test_every_fault_is_registered_and_known_tools_are_rendered() -> None:
    assert set(PROVIDER.faults) == set(FAULTS)
    names = {t.name for t in PROVIDER.tools(FAULTY)}
    # no `grep`: the node's real grep reads its /sys (sim/nodefs.py)
    assert names == {"nvidia-smi", "mlxlink", "ibv_devinfo"}
    files = PROVIDER.files(FAULTY)
    assert files["/sys/module/nvidia_peermem/initstate"] == "live\n"
    links = {p: e for p, e in files.items() if isinstance(e, Symlink)}
    assert sorted(p for p in links if p.startswith(IB)) == [
        f"{IB}/{d}" for d in [f"mlx5_{i}" for i in (0, 1, 3, 4, 5, 6, 7)] + ["mlx5_bond_0"]
    ]  # mlx5_2 is missing
    pci0 = "../../devices/pci0000:15/0000:18:00.0/infiniband/mlx5_0"
    assert links[f"{IB}/mlx5_0"] == Symlink(pci0)
    assert files[f"{SYSFS_DEV6}/ports/1/counters/symbol_error"] == Counter(1021, 66)
    assert files[f"{SYSFS_DEV6}/ports/1/counters/port_rcv_errors"] == "14\n"
    peerless = SimNode("gpu008", 7, "127.0.0.8", {}, {}, (Fault("peermem_missing"),))
    assert "/sys/module/nvidia_peermem/initstate" not in PROVIDER.files(peerless)


def test_the_node_greps_what_the_checks_fixture_says(tmp_path: Path) -> None:
    """The check unit tests feed `sysfs_listing`; a node answers the stage's commands from its
    tree with the real grep: the same lines (a counters directory in the filesystem's order),
    and the second read sees the symbol errors climbed."""
    model = base_model(7, faults={"gpu007": [{k.kind: k.arg} for k in FAULTY.faults]})
    model["overrides"] = {"gpu007": dict(FAULTY.hw)}
    fleet = build(tmp_path, model)
    first, again = run_script(fleet, "gpu007", [SYSFS_COMMAND, SYSFS_AGAIN_COMMAND])
    devs = node_hcas(FAULTY)
    for out, read in ((first, 0), (again, 1)):
        want = sysfs_listing(devs, read)
        assert (out.rc, out.stderr) == (0, "")
        assert sorted(out.stdout.splitlines()) == sorted(want.splitlines())
        kept = [ln for ln in out.stdout.splitlines() if "/counters/" not in ln]
        assert kept == [ln for ln in want.splitlines() if "/counters/" not in ln]
    assert f"{IB}/mlx5_6/ports/1/counters/symbol_error:1087" in again.stdout.splitlines()
