"""The `reach` section of a profile, typed once: OS release, version rules, uniformity."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from nodegate.core.thresholds import Threshold
from nodegate.core.versions import VersionRule
from nodegate.profiles import Profile
from nodegate.stages.reach.commands import CMD_TIMEOUT_S

SECTION = "reach"


@dataclass(frozen=True, slots=True)
class ReachProfile:
    """What a good node of one profile runs. `name` is the profile's: uniformity is judged among
    the nodes of one profile."""

    name: str
    os_id: Threshold  # one_of /etc/os-release ID values
    os_version_id: Threshold  # one_of VERSION_ID values
    kernel: VersionRule
    nvidia_driver: VersionRule
    ofed: VersionRule
    uniform: frozenset[str]  # parts every node of the profile must share: "kernel", "ofed", ...
    command_timeout_s: float = CMD_TIMEOUT_S  # each reach command's deadline

    @classmethod
    def of(cls, section: Mapping[str, Any], name: str) -> ReachProfile:
        """From the schema-validated `reach` section of profile `name`."""
        os_rel = section["os"]
        return cls(
            name=name,
            os_id=Threshold.from_profile(os_rel["id"], "reach.os.id"),
            os_version_id=Threshold.from_profile(os_rel["version_id"], "reach.os.version_id"),
            kernel=VersionRule.of(section["kernel"]),
            nvidia_driver=VersionRule.of(section["nvidia_driver"]),
            ofed=VersionRule.of(section["ofed"]),
            uniform=frozenset(section["uniform"]),
            command_timeout_s=float(section.get("command_timeout_s", CMD_TIMEOUT_S)),
        )


def reach_profile(profile: Profile) -> ReachProfile:
    """The typed `reach` section of a profile, built once per profile."""
    return profile.typed(SECTION, partial(ReachProfile.of, name=profile.name))
