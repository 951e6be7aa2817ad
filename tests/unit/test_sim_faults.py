"""The simulated fleet injects every fault it accepts, or refuses it at build (issue #9)."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodegate.core.errors import ConfigError

from tests.integration.conftest import base_model
from tests.simnode import build, run_script


@pytest.mark.parametrize("kind", ["garbage", "hang", "flood", "forge"])
def test_a_fault_a_process_tool_cannot_take_is_a_build_error(tmp_path: Path, kind: str) -> None:
    model = base_model(2, faults={"gpu002": [{kind: "ib_write_bw"}]})
    with pytest.raises(ConfigError) as exc:
        build(tmp_path, model)
    assert str(exc.value) == (
        f"gpu002: fault {kind}: ib_write_bw cannot be injected: ib_write_bw runs as a real "
        "simulated process here; only `missing` applies to it"
    )


def test_missing_reaches_a_process_tool(tmp_path: Path) -> None:
    fleet = build(tmp_path, base_model(2, faults={"gpu002": [{"missing": "ib_write_bw"}]}))
    (out,) = run_script(fleet, "gpu002", ["ib_write_bw --help"])
    assert (out.rc, out.stderr) == (127, "sh: 1: ib_write_bw: not found\n")


def test_the_stage_script_runs_under_the_real_launcher(tmp_path: Path) -> None:
    """Stdin is /dev/null once the script runs (it was read whole first), as on a real node."""
    fleet = build(tmp_path, base_model(1))
    # the command's parent is `timeout`, whose parent is the script's bash
    shell = "$(cut -d' ' -f4 /proc/$PPID/stat)"
    (out,) = run_script(fleet, "gpu001", [f"readlink /proc/{shell}/fd/0 /proc/{shell}/exe"])
    assert (out.rc, out.stdout.split()[0], out.stdout.split()[1].rsplit("/", 1)[1]) == (
        0,
        "/dev/null",
        "bash",
    )
