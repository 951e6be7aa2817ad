"""Data-plane addresses in the inventory (what ib_write_bw's client and mpirun connect to),
apart from the management address SSH reaches; and ib_pairs connecting to them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from nodegate.core.errors import ConfigError
from nodegate.core.values import Part, Shell
from nodegate.framework.active.addresses import PeerAddress, peer_address
from nodegate.inventory import DataPlane, FrozenMap, load_inventory
from nodegate.inventory.nodes import RailCable
from nodegate.profiles import ProfileLibrary
from nodegate.stages.ib_pairs.campaign import PairCampaign
from nodegate.stages.ib_pairs.perftest import READY
from nodegate.stages.ib_pairs.plan import PairTest
from nodegate.stages.ib_pairs.profile import ib_pairs_profile, profile_rails
from nodegate.transport.base import Transport
from nodegate.transport.local import LocalTransport
from nodegate.transport.process import RemoteProcess, SpawnError
from nodegate.transport.script import command_line

REPO = Path(__file__).resolve().parents[2]

INVENTORY = """\
version: 1
defaults:
  data_plane: {address: 10.1.0.1}
nodes:
  "gpu[001-003]": {}
  gpu002: {data_plane: {address: 10.1.0.2, rails: {"3": 192.168.3.2}}}
  gpu003: {ssh: {host: 172.16.0.3}, data_plane: {address: "fd00::0003"}}
groups:
  rail0: {nodes: "gpu[002-003]", data_plane: {rails: {"0": 192.168.0.99}}}
"""


def _load(tmp_path: Path, text: str) -> dict[str, DataPlane]:
    path = tmp_path / "inv.yaml"
    path.write_text(text)
    return {n.name: n.data_plane for n in load_inventory(path).nodes}


def test_data_plane_merges_defaults_groups_nodes(tmp_path: Path) -> None:
    got = _load(tmp_path, INVENTORY)
    assert got == {
        "gpu001": DataPlane("10.1.0.1", FrozenMap()),
        "gpu002": DataPlane("10.1.0.2", FrozenMap({0: "192.168.0.99", 3: "192.168.3.2"})),
        "gpu003": DataPlane("fd00::3", FrozenMap({0: "192.168.0.99"})),
    }
    assert got["gpu002"].for_rail(3) == ("192.168.3.2", "data_plane.rails.3")
    assert got["gpu002"].for_rail(5) == ("10.1.0.2", "data_plane.address")
    assert got["gpu002"].for_rail(None) == ("10.1.0.2", "data_plane.address")
    assert DataPlane().for_rail(0) is None


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "{address: 10.0.0.300}",
            "nodes.gpu001.data_plane.address: '10.0.0.300' is not an IP address (IPv4 or IPv6)",
        ),
        (
            '{rails: {"1": gpu001-ib1}}',
            "nodes.gpu001.data_plane.rails.1: 'gpu001-ib1' is not an IP address (IPv4 or IPv6)",
        ),
        (
            "{rails: {x: 10.0.0.1}}",
            "nodes.gpu001.data_plane.rails: invalid name 'x': a rail number: 0, 1, ...",
        ),
        (
            "{rails: {1: 10.0.0.1}}",
            "nodes.gpu001.data_plane.rails.1: key 1 is a number, not a string (quote it)",
        ),
        (
            "{adress: 10.0.0.1}",
            "nodes.gpu001.data_plane.adress: unknown key 'adress' "
            "(expected one of: address, rails)",
        ),
        (
            "{address: 17}",
            "nodes.gpu001.data_plane.address: expected a string, got a number 17 (quote it)",
        ),
    ],
    ids=["bad-ip", "name-not-ip", "rail-not-number", "rail-unquoted", "typo", "number"],
)
def test_data_plane_errors_name_file_and_key(tmp_path: Path, spec: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, f"version: 1\nnodes:\n  gpu001: {{data_plane: {spec}}}\n")
    assert str(info.value) == f"{tmp_path / 'inv.yaml'}: {message}"


class _Named(Transport):
    async def _session(self, node: str, script_text: str, deadline_s: float) -> object:
        raise NotImplementedError

    def address(self, node: str) -> str:
        return f"mgmt-{node}"


def test_peer_address_falls_back_rail_then_node_then_management(tmp_path: Path) -> None:
    nodes = {n.name: n for n in load_inventory(_write(tmp_path, INVENTORY)).nodes}
    t = _Named()
    assert peer_address(nodes["gpu002"], 3, t) == PeerAddress("192.168.3.2", "data_plane.rails.3")
    assert peer_address(nodes["gpu002"], 1, t) == PeerAddress("10.1.0.2", "data_plane.address")
    bare = _write(tmp_path, "version: 1\nnodes: {gpu009: {}}\n", "bare.yaml")
    (n9,) = load_inventory(bare).nodes
    assert peer_address(n9, 1, t) == PeerAddress("mgmt-gpu009", "management")


def _write(tmp_path: Path, text: str, name: str = "inv.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


class _ClientRefused:
    """Starts real (local) servers that report ready; refuses every client, noting its
    command line."""

    def __init__(self) -> None:
        self.local = LocalTransport()
        self.clients: list[tuple[str, str]] = []

    async def spawn(self, node: str, command: Sequence[Part], timeout_s: float) -> RemoteProcess:
        cmd = command_line(command)
        if "NODEGATE-PERFTEST-LISTENING" in cmd:
            return await self.local.spawn(node, (Shell(f"echo {READY}; sleep 0.2"),), 10)
        self.clients.append((node, cmd))
        raise SpawnError(node, "unreachable", "refused")


def test_ib_write_bw_client_connects_to_the_servers_data_plane_address(tmp_path: Path) -> None:
    nodes = list(load_inventory(_write(tmp_path, INVENTORY)).nodes)
    prof = ProfileLibrary([REPO / "inventories" / "profiles"]).get("generic-hgx-h100")
    camp = PairCampaign(
        "generic-hgx-h100", ib_pairs_profile(prof), profile_rails(prof), nodes, _Named()
    )
    spawner = _ClientRefused()

    async def go() -> list[str | None]:
        tests = [PairTest(3, "gpu002", "gpu001"), PairTest(0, "gpu003", "gpu001")]
        return [(await camp.execute(t, spawner)).error for t in tests]

    t0 = time.monotonic()
    errors = asyncio.run(go())
    assert time.monotonic() - t0 < 10
    assert errors == ["client gpu001: unreachable: refused"] * 2
    assert [(n, cmd.rsplit(" ", 1)[-1]) for n, cmd in spawner.clients] == [
        ("gpu001", "192.168.3.2"),  # gpu002's rail 3 address
        ("gpu001", "192.168.0.99"),  # gpu003's rail 0 address (from its group)
    ]
    assert camp.plan_header()["server_addresses"] == {
        "gpu001": {"address": "10.1.0.1", "from": "data_plane.address"},
        "gpu002": {
            "address": "10.1.0.2",
            "from": "data_plane.address",
            "rails": {
                "0": {"address": "192.168.0.99", "from": "data_plane.rails.0"},
                "3": {"address": "192.168.3.2", "from": "data_plane.rails.3"},
            },
        },
        "gpu003": {
            "address": "fd00::3",
            "from": "data_plane.address",
            "rails": {"0": {"address": "192.168.0.99", "from": "data_plane.rails.0"}},
        },
    }


CABLED = """\
version: 1
defaults:
  data_plane: {rails: {"0": {switch: leaf-r01-rail0}}}
nodes:
  "gpu[001-002]": {}
  gpu001: {data_plane: {rails: {"0": {address: 10.0.0.1, port: 1}, "1": 10.0.1.1}}}
  gpu002: {data_plane: {rails: {"0": {port: 2}, "3": {switch: leaf-r01-rail3, port: 2}}}}
"""


def test_rails_say_where_their_cables_land(tmp_path: Path) -> None:
    got = _load(tmp_path, CABLED)
    assert got["gpu001"] == DataPlane(
        None,
        FrozenMap({0: "10.0.0.1", 1: "10.0.1.1"}),
        FrozenMap({0: RailCable("leaf-r01-rail0", 1)}),
    )
    assert got["gpu002"].cables == FrozenMap(
        {0: RailCable("leaf-r01-rail0", 2), 3: RailCable("leaf-r01-rail3", 2)}
    )
    assert got["gpu002"].rails == FrozenMap()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ('{"0": {switch: leaf, port: 0}}', "nodes.gpu001.data_plane.rails.0.port: 0 out of range "
         "(expected 1..255)"),
        ('{"0": {swich: leaf}}', "nodes.gpu001.data_plane.rails.0.swich: unknown key 'swich' "
         "(expected one of: address, port, switch)"),
        ('{"0": {port: "3"}}', "nodes.gpu001.data_plane.rails.0.port: expected an integer, got a "
         "string '3'"),
        ('{"0": {}}', "nodes.gpu001.data_plane.rails.0: must not be empty"),
        ("{\"0\": {switch: \"le'af\"}}", "nodes.gpu001.data_plane.rails.0.switch: \"le'af\" is not "
         "a switch name (printable, no quote, <= 64)"),
        ('{"0": {address: 10.0.0.300}}', "nodes.gpu001.data_plane.rails.0.address: '10.0.0.300' "
         "is not an IP address (IPv4 or IPv6)"),
    ],
    ids=["port-range", "typo", "port-string", "empty", "quote", "bad-address"],
)  # fmt: skip
def test_rail_cable_errors_name_file_and_key(tmp_path: Path, spec: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, f"version: 1\nnodes:\n  gpu001: {{data_plane: {{rails: {spec}}}}}\n")
    assert str(info.value) == f"{tmp_path / 'inv.yaml'}: {message}"


@pytest.mark.parametrize(
    ("snapshot", "message"),
    [
        (None, "cannot read {p}: No such file or directory"),
        ("{", "{p} is not JSON (Expecting property name enclosed in double quotes: line 1 "
         "column 2 (char 1))"),
        ('{"schema_version": 1, "run": "x", "subnets": {"c": {"nodes": {}}}}',
         "{p} is not a fabric snapshot: subnets.c: 'uplinks' is a required property"),
    ],
    ids=["missing", "not-json", "schema"],
)  # fmt: skip
def test_fabric_snapshot_setting_is_checked_at_load(
    tmp_path: Path, snapshot: str | None, message: str
) -> None:
    snap = tmp_path / "golden.json"
    if snapshot is not None:
        snap.write_text(snapshot)
    text = "version: 1\nsettings: {fabric_snapshot: golden.json}\nnodes:\n  gpu001: {}\n"
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, text)
    where = f"{tmp_path / 'inv.yaml'}: settings.fabric_snapshot: "
    assert str(info.value) == where + message.format(p=snap)
