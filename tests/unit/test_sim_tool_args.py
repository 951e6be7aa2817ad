"""Simulated tools answer their arguments as the real tools do: the same answer for another
spelling or order the real tool accepts, and a failure (rc non-zero, the tool's message, a
`nodegate-sim:` line) for anything else: never a healthy output (issue #8)."""

from __future__ import annotations

import pytest
from nodegate.sim.fleet import Fleet

from tests.integration.conftest import base_model
from tests.simnode import Out, build, run, run_script


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    model = base_model(2, faults={"gpu002": ["fabricmanager_stopped"]})
    return build(tmp_path_factory.mktemp("toolargs"), model)


def ask(fleet: Fleet, cmd: str, node: str = "gpu001") -> Out:
    """The command's result; the same through the login shell and in a stage script."""
    plain = run(fleet, node, cmd)
    (framed,) = run_script(fleet, node, [cmd])
    assert framed == plain, cmd
    return plain


def same(fleet: Fleet, canonical: str, *others: str, node: str = "gpu001") -> Out:
    want = ask(fleet, canonical, node)
    assert want.stdout and want.stderr == "", want
    for cmd in others:
        assert ask(fleet, cmd, node) == want, cmd
    return want


def refused(tool: str, args: str, answers: str, message: str = "", stdout: str = "") -> Out:
    note = f"nodegate-sim: {tool} {args}: not simulated (answers: {answers})\n"
    return Out(None, stdout, message + note)


def check_refused(fleet: Fleet, cmd: str, rc: int, want: Out) -> None:
    assert ask(fleet, cmd) == Out(rc, want.stdout, want.stderr), cmd


NVSMI_BAD = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"


def test_nvidia_smi_long_forms_and_bad_arguments(fleet: Fleet) -> None:
    same(fleet, "nvidia-smi -q", "nvidia-smi --query")
    same(fleet, "nvidia-smi nvlink -s", "nvidia-smi nvlink --status")
    same(fleet, "nvidia-smi topo -m", "nvidia-smi topo --matrix")
    answers = "-q; nvlink -s; topo -m"
    for args in ("-q -x", "--bogus", "topo"):
        check_refused(
            fleet, f"nvidia-smi {args}", 2, refused("nvidia-smi", args, answers, stdout=NVSMI_BAD)
        )


def test_lspci_verbosity_in_any_spelling(fleet: Fleet) -> None:
    same(fleet, "lspci -vvv", "lspci -v -vv", "lspci -v -v -v", "lspci -vv -v")
    usage = "Usage: lspci [<switches>]\n"
    for args in ("-vv", "-nn", "-vvv -s 19:00.0"):
        check_refused(fleet, f"lspci {args}", 1, refused("lspci", args, "-vvv", usage))


def test_journalctl_options_in_any_order_and_window(fleet: Fleet) -> None:
    log = same(
        fleet,
        "journalctl -k --since -24h -o short-iso --no-pager",
        "journalctl --no-pager -o short-iso -k --since=-1h",
        "journalctl --dmesg --output=short-iso -S -2h -q",
        "journalctl -b -k -oshort-iso",
    )
    assert "NVRM: loading NVIDIA UNIX" in log.stdout
    bad = "journalctl: invalid arguments\n"
    for args in ("-k", "-u nvidia-fabricmanager", "-k -o json", "--since -1h -o short-iso"):
        check_refused(
            fleet, f"journalctl {args}", 1, refused("journalctl", args, "-k -o short-iso", bad)
        )


def test_systemctl_units_verbs_and_options(fleet: Fleet) -> None:
    same(
        fleet,
        "systemctl status nvidia-fabricmanager --no-pager",
        "systemctl --no-pager status nvidia-fabricmanager.service",
        "systemctl status nvidia-fabricmanager",
    )
    assert ask(fleet, "systemctl is-active nvidia-fabricmanager") == Out(0, "active\n", "")
    stopped = ask(fleet, "systemctl --no-pager status nvidia-fabricmanager.service", "gpu002")
    assert stopped.rc == 3 and "Active: inactive (dead)" in stopped.stdout
    assert ask(fleet, "systemctl is-active nvidia-fabricmanager", "gpu002") == Out(
        3, "inactive\n", ""
    )
    assert ask(fleet, "systemctl status nvidia-persistenced --no-pager") == Out(
        4, "", "Unit nvidia-persistenced.service could not be found.\n"
    )
    assert ask(fleet, "systemctl is-active nvidia-persistenced") == Out(3, "inactive\n", "")
    answers = "is-active nvidia-fabricmanager; status nvidia-fabricmanager"
    bad = "systemctl: invalid arguments\n"
    for args in ("restart nvidia-fabricmanager", "-l status nvidia-fabricmanager", "status"):
        check_refused(fleet, f"systemctl {args}", 1, refused("systemctl", args, answers, bad))


def test_dcgmi_diag_options_in_any_order(fleet: Fleet) -> None:
    same(fleet, "dcgmi diag -r 1 -j", "dcgmi diag --json --run 1", "dcgmi diag -j -r 1")
    answers = "diag -r 1 -j; diag -r 2 -j; diag -r 3 -j"
    bad = "dcgmi: invalid arguments\n"
    for args in ("diag -r 1", "diag -r 9 -j", "discovery -l", "diag -r 1 -j -v"):
        check_refused(fleet, f"dcgmi {args}", 1, refused("dcgmi", args, answers, bad))


def test_mlxlink_options_in_any_order(fleet: Fleet) -> None:
    same(
        fleet,
        "mlxlink -d mlx5_0 -m -c --json",
        "mlxlink --json -c -m --device mlx5_0",
        "mlxlink -m --show_counters -d mlx5_0 --json",
    )
    out = ask(fleet, "mlxlink -d mlx5_0 -m")
    assert (out.rc, out.stdout, out.stderr.splitlines()[0]) == (1, "", "mlxlink: invalid arguments")
    for dev in ("mlx5_9", "mlx5_bond_0"):  # absent; the front-end NIC (Ethernet)
        assert ask(fleet, f"mlxlink -d {dev} -m -c --json").rc == 1


def test_uname_parses_as_coreutils(fleet: Fleet) -> None:
    kernel = "5.15.0-105-generic"
    assert ask(fleet, "uname -r") == Out(0, f"{kernel}\n", "")
    assert ask(fleet, "uname --kernel-release") == ask(fleet, "uname --kernel-r")
    assert ask(fleet, "uname") == Out(0, "Linux\n", "")
    assert ask(fleet, "uname -rs") == Out(0, f"Linux {kernel}\n", "")
    assert ask(fleet, "uname -r -n") == Out(0, f"gpu001 {kernel}\n", "")
    assert ask(fleet, "uname -a") == Out(
        0,
        f"Linux gpu001 {kernel} #115-Ubuntu SMP Mon Apr 15 09:52:04 UTC 2024 "
        "x86_64 x86_64 x86_64 GNU/Linux\n",
        "",
    )
    try_help = "Try 'uname --help' for more information.\n"
    assert ask(fleet, "uname -rz") == Out(1, "", "uname: invalid option -- 'z'\n" + try_help)
    assert ask(fleet, "uname --bogus") == Out(
        1, "", "uname: unrecognized option '--bogus'\n" + try_help
    )
    assert ask(fleet, "uname -r foo") == Out(1, "", "uname: extra operand 'foo'\n" + try_help)


def test_ofed_info(fleet: Fleet) -> None:
    assert ask(fleet, "ofed_info -s") == Out(0, "MLNX_OFED_LINUX-23.10-1.1.9.0:\n", "")
    assert ask(fleet, "ofed_info -n") == Out(0, "23.10-1.1.9.0\n", "")
    check_refused(
        fleet,
        "ofed_info -l",
        1,
        refused("ofed_info", "-l", "-n; -s", "ofed_info: invalid arguments\n"),
    )


NUMACTL_USAGE = """usage: numactl [--all | -a] [--balancing | -b] [--interleave= | -i <nodes>]
               [--preferred= | -p <node>] [--physcpubind= | -C <cpus>]
               [--cpunodebind= | -N <nodes>] [--membind= | -m <nodes>]
               [--localalloc | -l] command args ...
"""


def test_numactl_parses_its_options(fleet: Fleet) -> None:
    for opts in ("--cpunodebind=1 --membind=1", "--cpunodebind 1 -m 1", "-N0 -l", "--"):
        assert ask(fleet, f"numactl {opts} echo hi") == Out(0, "hi\n", ""), opts
    assert ask(fleet, "numactl -N 5 echo hi") == Out(
        1, "", "libnuma: Warning: node argument 5 is out of range\n\n" + NUMACTL_USAGE
    )
    assert ask(fleet, "numactl --bogus echo hi") == Out(
        1, "", "numactl: unrecognized option '--bogus'\n" + NUMACTL_USAGE
    )
    assert ask(fleet, "numactl --cpunodebind=0") == Out(1, "", NUMACTL_USAGE)


def test_ib_write_bw_refuses_an_unknown_flag(fleet: Fleet) -> None:
    perftest = (
        " Invalid Command or flag.\n Please check command line and run again.\n\n"
        " Parser function exited with Error\n"
    )
    assert ask(fleet, "ib_write_bw -d mlx5_0 --bogus") == Out(
        1, "", "ib_write_bw: unrecognized option '--bogus'\n" + perftest
    )
    assert ask(fleet, "ib_write_bw -d mlx5_0 -Z") == Out(
        1, "", "ib_write_bw: invalid option -- 'Z'\n" + perftest
    )
