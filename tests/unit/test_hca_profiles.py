"""Every shipped profile has an `hca` section with a `sources` citation per key group, and the
VM profiles' relaxed rules (globs, ranges, null = not judged) behave."""

from __future__ import annotations

import pytest
from nodegate.model import Status
from nodegate.profiles import load_profile_file
from nodegate.stages.hca import STAGE

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
