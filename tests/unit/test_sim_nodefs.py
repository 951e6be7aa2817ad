"""A simulated node's files are read by its `cat` and `grep` as a real node's are: any path or
glob, not the stage's command lines (issue #8). Through the node's dispatcher, both ways a
session runs commands: evaluated by the login shell, and in a stage script (fast path)."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodegate.sim.fleet import Fleet

from tests.integration.conftest import base_model
from tests.simnode import Out, build, run, run_script

IB = "/sys/class/infiniband"
NDR = "400 Gb/sec (4X NDR)"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    faults = {
        "gpu002": [{"hca_port_2x": "mlx5_4"}, {"hca_missing": "mlx5_7"}],
        "gpu003": [{"missing": "grep"}],
        "gpu004": [{"hca_symbol_errors": "mlx5_6"}],  # read by the climbing test only
    }
    return build(tmp_path_factory.mktemp("nodefs"), base_model(4, faults=faults))


def both(fleet: Fleet, node: str, cmd: str) -> Out:
    """The command's result, the same through the login shell and in a stage script."""
    plain = run(fleet, node, cmd)
    (framed,) = run_script(fleet, node, [cmd])
    assert framed == plain, cmd
    return plain


def rates(node_rates: dict[str, str]) -> str:
    return "".join(f"{IB}/{d}/ports/1/rate:{r}\n" for d, r in node_rates.items())


def test_a_glob_the_stage_does_not_use_reads_the_tree(fleet: Fleet) -> None:
    out = both(fleet, "gpu002", f"grep -H -r . {IB}/*/ports/*/rate")
    want = {f"mlx5_{i}": NDR for i in range(7)}
    want["mlx5_4"] = "200 Gb/sec (2X NDR)"
    want["mlx5_bond_0"] = "200 Gb/sec (2X NDR)"
    assert out == Out(0, rates(want), "")


def test_cat_of_one_sysfs_file(fleet: Fleet) -> None:
    assert both(fleet, "gpu002", f"cat {IB}/mlx5_4/ports/1/rate") == Out(
        0, "200 Gb/sec (2X NDR)\n", ""
    )
    assert both(fleet, "gpu001", "cat /sys/module/nvidia_peermem/initstate") == Out(0, "live\n", "")
    # options: the host's cat on the node's file, messages naming the path as given
    assert both(fleet, "gpu001", f"cat -n {IB}/mlx5_0/fw_ver") == Out(0, "     1\t28.41.1000\n", "")
    assert both(fleet, "gpu001", "cat -A /nowhere") == Out(
        1, "", "cat: /nowhere: No such file or directory\n"
    )
    # the healthy fast path: no glob, no shell: the in-shell function
    assert both(fleet, "gpu001", f"grep -H . {IB}/mlx5_0/ports/1/state") == Out(
        0, f"{IB}/mlx5_0/ports/1/state:4: ACTIVE\n", ""
    )


def test_a_wrong_glob_fails_as_grep_does(fleet: Fleet) -> None:
    wrong = f"{IB}/*/port/*/state"  # `port`, singular: no such directory on a node
    msg = f"grep: {wrong}: No such file or directory\n"
    assert both(fleet, "gpu001", f"grep -H -r . {wrong}") == Out(2, "", msg)
    # next to a right one, its lines still print and rc says trouble (2), as on a node
    out = both(fleet, "gpu002", f"grep -H -r . {wrong} {IB}/mlx5_[01]/ports/*/rate")
    assert out == Out(2, rates({"mlx5_0": NDR, "mlx5_1": NDR}), msg)
    assert both(fleet, "gpu001", f"grep -H -r . {wrong} 2>/dev/null") == Out(2, "", "")
    assert both(fleet, "gpu001", f"cat {IB}/mlx5_0/fw_version") == Out(
        1, "", f"cat: {IB}/mlx5_0/fw_version: No such file or directory\n"
    )
    assert both(fleet, "gpu001", f"cat {IB}") == Out(1, "", f"cat: {IB}: Is a directory\n")
    # a device the node lacks is absent, not invented
    assert both(fleet, "gpu002", f"cat {IB}/mlx5_7/fw_ver").rc == 1


def test_grep_r_follows_named_links_only(fleet: Fleet) -> None:
    # /sys/class/infiniband holds links: met while recursing, grep -r does not follow them
    assert both(fleet, "gpu001", f"grep -r . {IB}") == Out(1, "", "")
    out = both(fleet, "gpu001", f"grep -r . {IB}/mlx5_1/")
    lines = out.stdout.splitlines()
    # no device/ (a link), 21 counters, a P_Key table of 16
    assert out.rc == 0 and len(lines) == 4 + 4 + 21 + 16
    assert sum("/ports/1/pkeys/" in ln for ln in lines) == 16
    assert {
        ln.split(":", 1)[0] for ln in lines if "/counters/" not in ln and "/pkeys/" not in ln
    } == {
        f"{IB}/mlx5_1/{f}"
        for f in ("fw_ver", "board_id", "hca_type", "node_guid")
        + tuple(f"ports/1/{p}" for p in ("state", "phys_state", "rate", "link_layer"))
    }
    # the named link is followed: the PCI function's attributes
    assert both(fleet, "gpu001", f"grep -H . {IB}/mlx5_1/device/max_link_width") == Out(
        0, f"{IB}/mlx5_1/device/max_link_width:16\n", ""
    )


def test_grep_options_are_parsed_as_grep_parses_them(fleet: Fleet) -> None:
    fw = f"{IB}/mlx5_0/fw_ver"
    first = f"{IB}/mlx5_0/fw_ver:28.41.1000\n"
    # a pattern that looks like a path is a pattern; -e/--regexp/abbreviations; permutation
    assert both(fleet, "gpu001", f"grep -H -e /nowhere -e 28 {fw}") == Out(0, first, "")
    assert both(fleet, "gpu001", f"grep --reg=28 {fw} -H") == Out(0, first, "")
    assert both(fleet, "gpu001", f"grep -c InfiniBand {IB}/mlx5_0/ports/1/link_layer") == Out(
        0, "1\n", ""
    )
    assert both(fleet, "gpu001", f"grep -h 28 {fw}") == Out(0, "28.41.1000\n", "")
    assert both(fleet, "gpu001", f"grep -l 28 {IB}/mlx5_bond_0/fw_ver {fw}") == Out(
        0, f"{fw}\n", ""
    )
    # -f FILE is read on the node too
    out = both(fleet, "gpu001", f"grep -H -f {fw} {IB}/mlx5_[0-9]/fw_ver")
    assert out == Out(0, "".join(f"{IB}/mlx5_{i}/fw_ver:28.41.1000\n" for i in range(8)), "")
    assert both(fleet, "gpu001", f"grep zzz {fw}") == Out(1, "", "")
    bad = both(fleet, "gpu001", f"grep --bogus 28 {fw}")
    assert (bad.rc, bad.stdout, bad.stderr.splitlines()[0]) == (
        2,
        "",
        "grep: unrecognized option '--bogus'",
    )
    assert both(fleet, "gpu001", f"grep -z 28 {fw}") == Out(
        2, "", "grep: -z/-Z on a simulated node's files is not simulated (nodegate sim)\n"
    )


def test_relative_paths_are_the_hosts_next_to_the_nodes(fleet: Fleet, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("rail 1: 28.41.1000\n")
    fw = f"{IB}/mlx5_1/fw_ver"
    out = both(fleet, "gpu001", f"cd {tmp_path} && grep -H 28.41 notes.txt {fw}")
    assert out == Out(0, f"notes.txt:rail 1: 28.41.1000\n{fw}:28.41.1000\n", "")
    assert both(fleet, "gpu001", f"cd {tmp_path} && grep -r rail") == Out(
        0, "notes.txt:rail 1: 28.41.1000\n", ""
    )


def test_a_faulty_grep_shadows_the_reader(fleet: Fleet) -> None:
    assert both(fleet, "gpu003", f"grep -H . {IB}/mlx5_0/fw_ver") == Out(
        127, "", "sh: 1: grep: not found\n"
    )


def test_counters_climb_for_any_reader(fleet: Fleet) -> None:
    sym = "ports/1/counters/symbol_error"
    dev = f"{IB}/mlx5_6"

    def value(cmd: str) -> int:
        out = run(fleet, "gpu004", cmd)
        assert out.rc == 0, out
        return int(out.stdout.strip().rsplit(":", 1)[-1])

    assert value(f"cat {dev}/{sym}") == 1021
    assert run(fleet, "gpu004", "cat /etc/os-release").rc == 0  # not /sys: no time passes
    assert value(f"grep -H . {IB}/*/{sym} | grep mlx5_6") == 1087
    pci = "/sys/devices/pci0000:c7/0000:ca:00.0/infiniband/mlx5_6"
    assert value(f"grep -r . {pci}/ports/1/counters | grep symbol_error") == 1153
    (framed,) = run_script(fleet, "gpu004", [f"cat {dev}/{sym}"])
    assert framed == Out(0, "1219\n", "")
    # a healthy port's counter does not move
    assert value(f"cat {IB}/mlx5_5/{sym}") == 0
    assert value(f"cat {IB}/mlx5_5/{sym}") == 0


def test_files_of_equal_content_share_an_inode_but_counters_do_not(fleet: Fleet) -> None:
    def node_file(node: str, rel: str) -> Path:
        return fleet.root / "nodes" / node / "root" / rel

    fw = "sys/devices/pci0000:15/0000:18:00.0/infiniband/mlx5_0/fw_ver"
    assert node_file("gpu001", fw).stat().st_ino == node_file("gpu002", fw).stat().st_ino
    sym = "sys/devices/pci0000:c7/0000:ca:00.0/infiniband/mlx5_6/ports/1/counters/symbol_error"
    assert node_file("gpu004", sym).stat().st_nlink == 1
    assert (fleet.root / "nodes" / "gpu004" / "climb.sh").read_text() == (
        f"ngsim__climb {sym} 66\n"
    )


def test_pgrep_sees_the_nodes_own_processes_only(fleet: Fleet) -> None:
    started = run(fleet, "gpu001", "sleep 313 >/dev/null 2>&1 & echo $!")
    pid = started.stdout.strip()
    assert started.rc == 0 and pid.isdigit()
    try:
        assert both(fleet, "gpu001", "pgrep -af 'sleep 31[3]'") == Out(0, f"{pid} sleep 313\n", "")
        assert both(fleet, "gpu001", "pgrep 'sleep 31[3]' -f") == Out(0, f"{pid}\n", "")
        assert both(fleet, "gpu002", "pgrep -af 'sleep 31[3]'") == Out(1, "", "")
        assert both(fleet, "gpu001", "pgrep -c -f 'sleep 31[3]'") == Out(
            2, "", "pgrep: -c on a simulated node is not simulated (nodegate sim)\n"
        )
    finally:
        run(fleet, "gpu001", f"kill {pid}")
