"""Every shipped profile has an `hca` section with a `sources` citation per key group, and the
VM profiles' relaxed rules (globs, ranges, null = not judged) behave."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from nodegate.core.errors import ConfigError
from nodegate.core.thresholds import Threshold
from nodegate.core.values import Status
from nodegate.profiles import load_profile_file
from nodegate.stages.hca import STAGE, Rail, hca_profile
from nodegate.stages.hca.profile import CountRule, PcieRule, VersionRule, show_expected

from tests.integration.conftest import REPO
from tests.unit.test_hca_checks import judge, outcome

PROFILES = sorted((REPO / "inventories" / "profiles").glob("[!_]*.yaml"))
KEYS = ("rails", "firmware", "counters", "gpudirect", "affinity", "link_health")


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.stem)
def test_profile_has_hca_section_with_sources(path) -> None:
    prof = load_profile_file(path)
    sec = prof.section("hca")
    cited = set(prof.data["sources"])
    need = {f"hca.roles.{r}" for r in sec["roles"]} | {f"hca.{k}" for k in KEYS}
    assert need <= cited, sorted(need - cited)


def test_vm_profile_rules_globs_ranges_and_not_judged() -> None:
    sec = load_profile_file(REPO / "inventories/profiles/nd-h100-v5.yaml").section("hca")
    # the simulated HGX node has physical ConnectX-7s: same names, other PCI id
    sec = {**sec, "roles": {**sec["roles"], "compute": {**sec["roles"]["compute"]}}}
    sec["roles"]["compute"]["pci_ids"] = ["15b3:1021"]
    out = outcome()
    verdicts = judge(out, sec)
    by = {}
    for v in verdicts:
        by.setdefault(v.check, []).append(v)
    assert {v.status for v in by["hca.model"] if "rail" in v.component} == {Status.PASS}  # psid *
    (front,) = [v for v in by["hca.count"] if v.component == "frontend HCAs"]
    assert (front.status, front.observed, front.expected) == (Status.PASS, 0, "0..1")
    (bf3,) = [v for v in by["hca.model"] if v.status is not Status.PASS]  # not a VF: no role
    assert bf3.component == "mlx5_bond_0 (no role)"
    assert all(v.expected == "not judged" for v in by["hca.pcie.gen"] if "rail" in v.component)
    assert all(v.status is Status.PASS and v.expected == "not judged" for v in by["hca.link.ber"])
    aff = by["hca.rail.affinity"][0]
    assert (aff.status, aff.observed) == (Status.PASS, "PIX to GPU0")
    fw = by["hca.firmware.version"][0]
    assert (fw.status, fw.expected) == (Status.PASS, "any")
    # link_health null: no mlxlink command is planned
    from nodegate.profiles import Profile

    prof = Profile("nd-h100-v5", "x", {"hca": sec})
    assert not [c for c in STAGE.commands(None, prof) if c.id.startswith("mlxlink_")]  # type: ignore[arg-type]


# -- the typed section -------------------------------------------------------------------
def test_typed_section_carries_thresholds_rules_and_rails() -> None:
    prof = load_profile_file(REPO / "inventories/profiles/generic-hgx-h100.yaml")
    hp = hca_profile(prof)
    assert hp is hca_profile(prof) and hp.name == "generic-hgx-h100"  # built once per profile
    port = hp.compute.port
    assert (port.state, port.phys_state, port.width_lanes, port.speed, port.rate_gbps) == (
        Threshold("equal", "ACTIVE"),
        Threshold("equal", "LinkUp"),
        Threshold("equal", 4, "lanes"),
        Threshold("equal", "NDR"),
        Threshold("equal", 400, "Gb/s"),
    )
    assert hp.compute.pcie == PcieRule(Threshold("equal", 5), Threshold("equal", 16))
    (front,) = hp.others
    assert (front.name, front.count, front.link_layer) == (
        "frontend",
        CountRule((Threshold("equal", 1, "HCAs"),), "HCAs"),
        Threshold("equal", "Ethernet"),
    )
    assert hp.counters.max_delta["symbol_error"] == Threshold("max", 0, "errors")
    assert sorted(hp.counters.warn_absolute) == sorted(hp.counters.max_delta)
    assert hp.affinity == Threshold("one_of", ("PIX", "PXB"))
    assert hp.gpudirect.accept == Threshold("one_of", ("peermem", "dmabuf"))
    assert hp.link_health is not None
    assert (hp.link_health.effective_ber, hp.link_health.raw_ber) == (
        Threshold("max", 1e-12),
        Threshold("max", 1e-5),
    )
    assert hp.firmware_rule("MT_0000000838") == VersionRule(True, (), "28.39.1002", None)
    assert hp.firmware_rule("MT_9999") is None
    vm = hca_profile(load_profile_file(REPO / "inventories/profiles/nd-h100-v5.yaml"))
    assert vm.firmware_rule("MT_9999") == VersionRule(True)  # the '*' rule
    assert vm.compute.pcie is None and vm.link_health is None


def test_rails_are_typed_for_other_stages() -> None:
    """ib_pairs reads the rail map from here: device, GPU (index for --use_cuda), NUMA node."""
    hgx = hca_profile(load_profile_file(REPO / "inventories/profiles/generic-hgx-h100.yaml"))
    assert hgx.rails[4] == Rail(4, "mlx5_4", "GPU4", 1)
    assert (hgx.rails[4].gpu_index, hgx.rails[4].numa) == (4, Threshold("equal", 1))
    assert [r.rail for r in hgx.rails] == list(range(8))
    vm = hca_profile(load_profile_file(REPO / "inventories/profiles/nd-a100-v4.yaml"))
    assert (vm.rails[0].numa_node, vm.rails[0].numa) == (None, None)
    assert Rail(0, "mlx5_0", "GPUx", None).gpu_index is None


@pytest.mark.parametrize(
    ("doc", "expected", "holds", "fails"),
    [
        ({"equal": 1, "unit": "HCAs"}, 1, [1], [0, 2]),
        ({"min": 0, "max": 1, "unit": "HCAs"}, "0..1", [0, 1], [2]),
        ({"min": 2}, ">= 2", [2, 3], [1]),
    ],
)
def test_role_count_exact_range_or_bound(doc, expected, holds, fails) -> None:
    rule = CountRule.of(doc, "hca.roles.frontend.count")
    assert rule.expected() == expected
    assert [rule.holds(n) for n in holds + fails] == [True] * len(holds) + [False] * len(fails)


def test_expected_shows_equal_values_as_the_checks_always_did() -> None:
    assert show_expected(Threshold("equal", 400, "Gb/s")) == 400
    assert show_expected(Threshold("equal", 16), lambda v: f"x{v}") == "x16"
    assert show_expected(Threshold("min", 4), lambda v: f"Gen{v}") == ">= Gen4"
    assert show_expected(Threshold("one_of", (2, 4)), lambda v: f"{v}X") == "one of 2X, 4X"
    assert show_expected(Threshold("max", 0), lambda v: f"+{v}") == "<= +0"


def _profile_with(tmp_path, name: str, edit) -> Path:
    doc = yaml.safe_load((REPO / "inventories/profiles/generic-hgx-h100.yaml").read_text())
    edit(doc["hca"])
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({**doc, "name": name}))
    return path


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda h: h["affinity"].update(relations={"equal": "PIX"}),
            "hca.affinity.relations: 'one_of' is a required property",
        ),
        (
            lambda h: h["roles"]["frontend"].update(count=1),
            "hca.roles.frontend.count: 1 is not valid under any of the given schemas",
        ),
        (
            lambda h: h["roles"]["compute"]["port"].update(state={"min": 3}),
            "hca.roles.compute.port.state: False schema does not allow 3",
        ),
        (
            lambda h: h["counters"]["max_delta"].update(symbol_error={"min": 0}),
            "hca.counters.max_delta.symbol_error: 'max' is a required property",
        ),
        (
            lambda h: h["roles"]["compute"].update(link_layer={"equal": "Omni"}),
            "hca.roles.compute.link_layer.equal: 'Omni' is not one of ['InfiniBand', 'Ethernet']",
        ),
    ],
    ids=["relations-equal", "count-bare-int", "state-min", "delta-min", "link-layer"],
)
def test_hca_section_shapes_are_checked_at_load(tmp_path, edit, message) -> None:
    path = _profile_with(tmp_path, "site", edit)
    with pytest.raises(ConfigError) as exc:
        load_profile_file(path)
    assert [line.strip() for line in str(exc.value).splitlines()[1:]] == [message]


def test_port_state_is_compared_upper_case(tmp_path) -> None:
    def lower(h):
        h["roles"]["compute"]["port"]["state"] = {"equal": "active"}

    prof = load_profile_file(_profile_with(tmp_path, "site", lower))
    sec = prof.section("hca")
    assert hca_profile(prof).compute.port.state == Threshold("equal", "ACTIVE")
    states = [v for v in judge(outcome(), sec) if v.check == "hca.port.state"]
    assert len(states) == 8 and {(v.status, v.expected) for v in states} == {
        (Status.PASS, "ACTIVE/LinkUp")
    }
