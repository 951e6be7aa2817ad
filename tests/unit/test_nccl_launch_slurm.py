"""nccl jobs under `--transport slurm` (stages/nccl/launch.py): mpirun inside the allocation
names the nodes as Slurm does and starts Open MPI's daemons through srun steps; a job with a
drained node (reached over SSH) launches as over SSH; srun runs as a step of the allocation.
A launcher that fails before any rank ran is named with its own message (results.py)."""

from __future__ import annotations

from pathlib import Path

from nodegate.framework.active.campaign import Execution, Side
from nodegate.profiles import ProfileLibrary
from nodegate.stages.nccl.exits import rank_exit
from nodegate.stages.nccl.launch import DEBUG_FILTER, mpirun_script, srun_argv
from nodegate.stages.nccl.profile import NcclProfile, nccl_profile
from nodegate.stages.nccl.results import launcher_message, read_job
from nodegate.transport.process import ProcessResult
from nodegate.transport.script import command_line

REPO = Path(__file__).resolve().parents[2]
ENV = {"NCCL_COMM_ID": "10.0.0.1:61000"}
HEAD = (
    'hf=$(mktemp "${TMPDIR:-/tmp}/nodegate-nccl-hosts.XXXXXX") || exit 70\n'
    "trap 'rm -f \"$hf\"' EXIT\ntrap 'exit 143' TERM INT\n"
)
TAIL = (
    "-x NCCL_COMM_ID -x NODEGATE_SPAWN all_reduce_perf -b 1048576 -e 8589934592 -f 2 -g 1 "
    "-c 1 -n 20 -w 5"
)
# Open MPI 4.1.4 (Debian) mpirun in a Slurm 22.05.8 step, a hostfile of data-plane addresses
# (the issue's): its stderr as captured on the simulated fleet, the step's own srun line last
BAR = "-" * 74
NOT_IN_ALLOCATION = "\n".join([
    BAR,
    'A hostfile was provided that contains at least one node not',
    'present in the allocation:',
    '',
    '  hostfile:  /tmp/nodegate-nccl-hosts.Ab12Cd',
    '  node:      127.83.0.2',
    '',
    'If you are operating in a resource-managed environment, then only',
    'nodes that are in the allocation can be used in the hostfile. You',
    'may find relative node syntax to be a useful alternative to',
    'specifying absolute node names see the orte_hosts man page for',
    'further information.',
    BAR,
    BAR,
    'An internal error has occurred in ORTE:',
    '',
    "[[9702,0],0] FORCE-TERMINATE AT (null):1 - error "
    "../../../../../../orte/mca/plm/slurm/plm_slurm_module.c(475)",
    '',
    'This is something that should be reported to the developers.',
    BAR,
    'srun: error: gpu001: task 0: Exited with exit code 1',
    '',
])  # fmt: skip


def profile() -> NcclProfile:
    lib = ProfileLibrary([REPO / "inventories" / "profiles"])
    return nccl_profile(lib.get("generic-hgx-h100"))


def test_mpirun_inside_the_allocation_names_slurm_nodes_and_starts_daemons_through_srun():
    line = command_line(mpirun_script(profile(), ["gpu001", "gpu002"], ENV, "allocation"))
    assert line == (
        HEAD + "printf '%s\\n' 'gpu001 slots=8' 'gpu002 slots=8' > \"$hf\"\n"
        "unset SLURM_JOB_NODELIST\n"
        "NCCL_COMM_ID=10.0.0.1:61000; export NCCL_COMM_ID\n"
        # the profile asserts a transport: mpirun's stdout through the filter, its rc kept
        "exec 3>&1\nrc=$({ { "
        'mpirun --hostfile "$hf" -np 16 --map-by ppr:8:node --bind-to numa --mca plm slurm '
        "--mca ras '^slurm' --mca plm_slurm_args '--overlap --nodelist=gpu001,gpu002' "
        + TAIL
        + f'; echo $? >&4; }} | {DEBUG_FILTER} >&3; }} 4>&1)\nexit "$rc"\n'
    )


def test_mpirun_in_a_slurm_step_for_a_job_with_a_drained_node_goes_over_ssh():
    line = command_line(mpirun_script(profile(), ["10.0.0.1", "10.0.0.2"], ENV, "step"))
    assert "printf '%s\\n' '10.0.0.1 slots=8' '10.0.0.2 slots=8' > \"$hf\"\n" in line
    assert "unset SLURM_JOB_NODELIST" not in line
    assert "--bind-to numa --mca plm rsh --mca ras '^slurm' -x NCCL_COMM_ID" in line


def test_mpirun_over_ssh_is_unchanged():
    line = command_line(mpirun_script(profile(), ["10.0.0.1"], ENV))
    assert "--mca" not in line and "SLURM" not in line


def test_srun_in_the_allocation_is_a_step_of_it():
    argv = srun_argv(profile(), ["gpu001", "gpu002"], 60, "nodegate-nccl-x", job="42")
    assert argv[:9] == ["srun", "--jobid=42", "--overlap", "--overcommit", "-N", "2",
                        "--ntasks-per-node=8", "--mpi=none", "-w"]  # fmt: skip
    assert "--jobid=42" not in srun_argv(profile(), ["gpu001"], 60, "nodegate-nccl-x")


def test_mpirun_s_daemon_launcher_lines_name_no_rank():
    daemon = "srun: error: gpu001: task 0: Exited with exit code 1\n"
    assert rank_exit(daemon, ("gpu001",), 8, srun=False) is None
    assert rank_exit(daemon, ("gpu001",), 8) == "rank 0 on gpu001 exited 1"


def launcher(role: str, stderr: str, rc: int = 1) -> Execution:
    r = ProcessResult("gpu001", "mpirun ...", rc, "", stderr, False, False, 0.4)
    return Execution((Side("gpu001", role, "mpirun ...", r),))


def test_a_launcher_that_failed_before_any_rank_says_so_in_its_own_words():
    reading = read_job(launcher("launcher", NOT_IN_ALLOCATION), 8589934592, 16, 60)
    assert reading.error == (
        "mpirun exited 1: A hostfile was provided that contains at least one node not present "
        "in the allocation: hostfile: /tmp/nodegate-nccl-hosts.Ab12Cd node: 127.83.0.2"
    )
    daemon = "\n".join([
        BAR, "An ORTE daemon has unexpectedly failed after launch and before",
        "communicating back to mpirun. This could be caused by a number", BAR,
        "srun: error: gpu001: task 0: Exited with exit code 1", "",
    ])  # fmt: skip
    reading = read_job(launcher("launcher", daemon), 8589934592, 16, 60, ("gpu001", "gpu002"))
    assert reading.error == (
        "mpirun exited 1: An ORTE daemon has unexpectedly failed after launch and before "
        "communicating back to mpirun. This could be caused by a number"
    )
    said = "srun: cluster configuration lacks support for cpu binding\nsrun: error: Unable to "
    said += "create step for job 42: Requested nodes are busy\n"
    assert read_job(launcher("srun", said), 8589934592, 16, 60).error == (
        "srun exited 1: srun: error: Unable to create step for job 42: Requested nodes are busy"
    )
    assert read_job(launcher("launcher", ""), 8589934592, 16, 60).error == (
        "mpirun exited 1: no message"
    )


def test_a_launcher_message_is_bounded_and_none_without_words():
    assert launcher_message("-----\n\n=====\n") is None
    assert len(launcher_message("x" * 10_000) or "") == 300
