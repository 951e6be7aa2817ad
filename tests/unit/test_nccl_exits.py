"""A rank that ended its job early, as mpirun or srun reports it: named with its node, its exit
code or signal and its own stderr line (stages/nccl/exits.py)."""

from __future__ import annotations

from nodegate.stages.nccl.exits import rank_exit

NODES = ("gpu001", "gpu002")
HOSTS = {"10.0.0.1": "gpu001", "10.0.0.2": "gpu002"}
OWN = "gpu002 pid 4242: rank 3: fatal: cuMemAlloc failed: out of memory"
PEER = "gpu002:4241:4243 [0] NCCL WARN NET/Socket : socket closed by peer (remote process exited)"
BAR = "-" * 74


def test_mpirun_a_rank_killed_by_a_signal_names_its_node_by_address() -> None:
    text = "\n".join([OWN, PEER, BAR, "mpirun noticed that process rank 3 with PID 4242 on node "
                      "10.0.0.2 exited on signal 9 (Killed).", BAR])  # fmt: skip
    assert rank_exit(text, NODES, 4, HOSTS) == (
        f"rank 3 on gpu002 killed by signal 9 (Killed); its stderr: {OWN}"
    )


def test_mpirun_a_rank_s_exit_code_names_the_node_its_rank_ran_on() -> None:
    text = "\n".join([
        OWN, PEER, BAR, "Primary job  terminated normally, but 1 process returned",
        "a non-zero exit code. Per user-direction, the job has been aborted.", BAR, BAR,
        "mpirun detected that one or more processes exited with non-zero status, thus causing",
        "the job to be terminated. The first process to do so was:", "",
        "  Process name: [[20606,1],3]", "  Exit code:    3", BAR,
    ])  # fmt: skip
    assert rank_exit(text, NODES, 4, HOSTS) == f"rank 3 on gpu002 exited 3; its stderr: {OWN}"


def test_srun_exit_code_and_signal() -> None:
    text = f"{OWN}\nsrun: error: gpu002: task 3: Exited with exit code 3\n"
    assert rank_exit(text, NODES, 4) == f"rank 3 on gpu002 exited 3; its stderr: {OWN}"
    text = "srun: error: gpu001: tasks 0-1: Killed\n"
    assert rank_exit(text, NODES, 4) == "rank 0 on gpu001 killed (Killed)"


def test_no_rank_named_no_rank_exit() -> None:
    assert rank_exit(f"{OWN}\n{PEER}\n", NODES, 4, HOSTS) is None
