"""Admission policy: which checks a node of a profile needs to be admitted.

Default: every check of every registered stage the profile has a section for. A profile may
narrow or widen it under `admission.require`:

    admission:
      require:
        stages: [reach, pcie_gpu, hca]      # default: every stage with a section here
        not_required: [gpu.dcgm]            # check ids of those stages left out
        also_required: [site.test_site_kernel.test_kernel_prefix]   # e.g. a site check
      min_level: extended                   # a bring-up profile: only --level extended admits

A run that did not run every required check for a node cannot admit it (`not_qualified`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nodegate.core.errors import ConfigError
from nodegate.core.settings import LEVELS
from nodegate.framework.stage import Stage
from nodegate.profiles import Profile

SITE_PREFIX = "site."  # site checks (`nodegate.session.collection`): not in any stage's table


@dataclass(frozen=True, slots=True)
class AdmissionPolicy:
    """The check ids a node of `profile` needs, in pipeline order."""

    profile: str
    stages: tuple[str, ...]
    required: tuple[str, ...]
    min_level: str | None = None  # admission.min_level: the shallowest --level that admits

    def to_json(self) -> dict[str, Any]:
        level = {} if self.min_level is None else {"min_level": self.min_level}
        return {"stages": list(self.stages), "required": list(self.required), **level}

    def level_shortfall(self, level: str) -> str | None:
        """Why a run at `level` cannot admit this profile's nodes (None: it can)."""
        if self.min_level is None or LEVELS.index(level) >= LEVELS.index(self.min_level):
            return None
        return (
            f"--level {level} is below this profile's admission.min_level {self.min_level}: "
            f"run --level {self.min_level} to admit"
        )


def policy_of(profile: Profile, stages: Sequence[Stage]) -> AdmissionPolicy:
    """The profile's policy over the registered `stages`; ConfigError naming the bad key."""
    where = f"profile {profile.name} ({profile.source}): admission.require"
    adm = profile.data.get("admission")
    req: Mapping[str, Any] = (adm.get("require") or {}) if isinstance(adm, Mapping) else {}
    by_name = {s.name: s for s in stages}
    if "stages" in req:
        names = list(req["stages"])
        for n in names:
            if n not in by_name:
                known = ", ".join(by_name)
                raise ConfigError(f"{where}.stages: unknown stage {n!r} (known: {known})")
            if profile.data.get(n) is None:
                raise ConfigError(f"{where}.stages: {n!r} has no section in this profile")
    else:
        # A section set to null (`roce: null`: not a RoCE SKU) declares the stage does not
        # apply: its checks pass with a note, and a run without them can still qualify.
        names = [s.name for s in stages if profile.data.get(s.name) is not None]
    ids = [c.id for n in names for c in by_name[n].checks]
    for c in req.get("not_required", ()):
        if c not in ids:
            raise ConfigError(f"{where}.not_required: {c!r} is not a check of {names}")
    known_ids = {c.id for s in stages for c in s.checks}
    extra = list(req.get("also_required", ()))
    for c in extra:
        if c not in known_ids and not c.startswith(SITE_PREFIX):
            raise ConfigError(f"{where}.also_required: {c!r} is not a registered or site check")
    dropped = set(req.get("not_required", ()))
    required = tuple(dict.fromkeys([c for c in ids if c not in dropped] + extra))
    if not required:
        raise ConfigError(f"{where}: requires no check (a node could never be qualified)")
    min_level = adm.get("min_level") if isinstance(adm, Mapping) else None
    return AdmissionPolicy(profile.name, tuple(names), required, min_level)
