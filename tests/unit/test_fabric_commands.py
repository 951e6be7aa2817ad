"""What the fabric stage runs, rendered as the node's shell gets it (the companion of
test_rendered_commands.py, whose fixture pins the stages that predate the argv parts): every
node's two sysfs reads, an observer's queries of its subnet, and a hostile rail device name
reaching the shell only as a quoted argument."""

from __future__ import annotations

import copy
from pathlib import Path

from nodegate.profiles import Profile, ProfileLibrary
from nodegate.stages.fabric import STAGE
from nodegate.stages.fabric.profile import fabric_profile
from nodegate.transport.script import command_line

REPO = Path(__file__).resolve().parents[2]
LIB = ProfileLibrary([REPO / "inventories" / "profiles"])
IB = "/sys/class/infiniband"
LIDS = (
    """lids=$(ibnetdiscover -p -C "$1" -P "$2" | awk '"'"'$1=="SW" && $2 ~ /^[0-9]+$/ """
    """{print $2}'"'"' | sort -un)"""
)
COUNTERS = (
    f"""sh -c 'set -e; {LIDS}; for l in $lids; do perfquery -x -l -C "$1" -P "$2" "$l"; done'"""
)
FIRMWARE = (
    f"""sh -c 'set -e; {LIDS}; for l in $lids; do echo "# lid $l"; """
    """flint -d "lid-$l,$1,$2" q; done'"""
)


def rendered(prof: Profile) -> list[tuple[str, float, str]]:
    fp = fabric_profile(prof)
    specs = STAGE.commands(None, prof) + STAGE.observer_commands(fp, list(fp.subnets))  # type: ignore[arg-type]
    return [(s.id, s.timeout_s, command_line(s.argv)) for s in specs]


def test_node_and_observer_commands() -> None:
    assert rendered(LIB.get("generic-hgx-h100")) == [
        ("node_guids", 15.0, f"grep -H . {IB}/*/node_guid {IB}/*/ports/*/state "
         f"{IB}/*/ports/*/phys_state {IB}/*/ports/*/rate 2>/dev/null"),
        ("pkeys", 15.0, f"grep -H . {IB}/*/ports/*/pkeys/* 2>/dev/null"),
        ("ibnetdiscover_compute", 60.0, "ibnetdiscover -p -C mlx5_0 -P 1"),
        ("sminfo_compute", 30.0, "sminfo -C mlx5_0 -P 1"),
        ("saquery_compute", 30.0, "saquery -C mlx5_0 -P 1 SMIR"),
        ("perfquery_compute", 90.0, f"{COUNTERS} sh mlx5_0 1"),
        ("switch_fw_compute", 90.0, f"{FIRMWARE} sh mlx5_0 1"),
        ("counter_window", 16.0, "sleep 1"),
        ("perfquery_again_compute", 90.0, f"{COUNTERS} sh mlx5_0 1"),
    ]  # fmt: skip


def test_a_hostile_device_name_is_one_quoted_argument() -> None:
    data = copy.deepcopy(dict(LIB.get("generic-hgx-h100").data))
    data["hca"]["rails"][0]["device"] = "$(reboot) x;y"
    got = dict((i, c) for i, _, c in rendered(Profile("hostile", "hostile", data)))
    assert got["ibnetdiscover_compute"] == "ibnetdiscover -p -C '$(reboot) x;y' -P 1"
    assert got["perfquery_compute"] == f"{COUNTERS} sh '$(reboot) x;y' 1"
