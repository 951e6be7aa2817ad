"""SKU profiles: YAML files validated against schemas/profile.schema.json at load time."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

from nodegate.core import bundled, schemas
from nodegate.core.errors import ConfigError
from nodegate.core.thresholds import DIRECTIONS
from nodegate.inventory.yamlio import load_yaml

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    source: str
    data: Mapping[str, Any]
    extends: tuple[str, ...] = ()  # profiles and fragments it overlays, in order
    level: str | None = None  # the --level its `levels:` overlay was applied for (at_level)
    # Typed views of sections, built once per profile (see `typed`).
    _typed: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def section(self, stage: str) -> Mapping[str, Any]:
        sec = self.data.get(stage)
        if not isinstance(sec, Mapping):
            raise ConfigError(f"profile {self.name} ({self.source}) has no {stage!r} section")
        return sec

    def typed(self, stage: str, build: Callable[[Mapping[str, Any]], T]) -> T:
        """The stage's section as a typed object, built once: `prof.typed("hca", HcaProfile.of)`."""
        if stage not in self._typed:
            self._typed[stage] = build(self.section(stage))
        got: T = self._typed[stage]
        return got


def at_level(profile: Profile, level: str) -> Profile:
    """The profile as a run at `level` sees it: its `levels.<level>` sections overlaid (deep
    merge, as `extends`), validated whole; a profile without `levels:` runs as written.

    >>> p = Profile("p", "p.yaml", {"gpu_load": {"run": {"burn_s": 60}},
    ...     "levels": {"quick": {"gpu_load": {"run": {"burn_s": 5}}}}})
    >>> at_level(p, "quick").data["gpu_load"]["run"]["burn_s"]
    5
    """
    levels = profile.data.get("levels")
    overlay = levels.get(level) if isinstance(levels, Mapping) else None
    if not overlay:
        return Profile(profile.name, profile.source, profile.data, profile.extends, level)
    data = _deep_merge(profile.data, overlay)
    validate_profile(data, f"{profile.source} (at level {level}: levels.{level})")
    return Profile(profile.name, profile.source, data, profile.extends, level)


@lru_cache(maxsize=1)
def profile_schema() -> dict[str, Any]:
    """The base schema plus every stage's section (schemas/profile.<stage>.schema.json).

    A fragment's `$defs` may refer to the base's shared definitions (`#/$defs/versionRule`).
    """
    doc = copy.deepcopy(schemas.load("profile"))
    for name in schemas.names():
        stage = name.removeprefix("profile.")
        if stage == name or not stage:
            continue
        frag = copy.deepcopy(schemas.load(name))
        frag.pop("$schema", None)
        doc["$defs"].update(frag.pop("$defs", {}))
        doc["properties"][stage] = frag
    return doc


def validate_profile(doc: Any, source: str) -> None:
    """Raise ConfigError naming the file and every offending key path."""
    errors = schemas.problems(profile_schema(), doc)
    if errors:
        lines = [f"{schemas.where(e)}: {e.message}" for e in errors[:10]]
        raise ConfigError(f"invalid profile {source}:\n  " + "\n  ".join(lines))


FRAGMENT_PREFIX = "_"  # `_name.yaml`: a shared fragment profiles extend, not a profile itself
MAX_EXTENDS_DEPTH = 8


def _deep_merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """`top` overlaid on `base`: mappings merge key by key, anything else is replaced; a
    threshold overlaid by one of another direction is replaced whole (`{min: 0, max: 2}`
    over `{equal: 1}` is the range, never both)."""
    out = dict(base)
    for k, v in top.items():
        old = out.get(k)
        if isinstance(old, Mapping) and isinstance(v, Mapping) and not _redirects(old, v):
            out[k] = _deep_merge(old, v)
        else:
            out[k] = v
    return out


def _directions(doc: Mapping[str, Any]) -> set[str] | None:
    """The direction keys of a threshold-shaped mapping (only directions and a unit)."""
    keys = set(doc)
    found = keys & set(DIRECTIONS)
    return found if found and keys <= {*DIRECTIONS, "unit"} else None


def _redirects(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    was, now = _directions(old), _directions(new)
    return was is not None and now is not None and was != now


def _read_doc(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read profile {path}: {exc}") from None
    doc: Any = load_yaml(str(path), text)
    if not isinstance(doc, dict):
        raise ConfigError(f"invalid profile {path}: (top level): a mapping of keys")
    return doc


def _parents(doc: Mapping[str, Any], path: Path) -> list[str]:
    ext = doc.get("extends", [])
    names = [ext] if isinstance(ext, str) else ext
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise ConfigError(f"invalid profile {path}: extends: a profile name or a list of names")
    return names


class ProfileLibrary:
    """Profiles by name from search directories (first hit wins), `extends:` resolved.

    A profile may name profiles or `_fragments` it overlays (`extends: [_nvidia-xid,
    nd-h100-v5]`, applied in order, the profile itself last); the merged document is what the
    schema validates. The shipped profiles directory is always searched last.
    """

    def __init__(self, dirs: Iterable[str | os.PathLike[str]]) -> None:
        self.dirs = [Path(d) for d in dirs]
        shipped = bundled.profiles_dir()
        if all(d.resolve() != shipped.resolve() for d in self.dirs if d.exists()):
            self.dirs.append(shipped)
        self._cache: dict[str, Profile] = {}

    def available(self) -> list[str]:
        names: set[str] = set()
        for d in self.dirs:
            if d.is_dir():
                names.update(
                    p.stem for p in d.glob("*.yaml") if not p.stem.startswith(FRAGMENT_PREFIX)
                )
        return sorted(names)

    def _find(self, name: str) -> Path:
        for d in self.dirs:
            p = d / f"{name}.yaml"
            if p.is_file():
                return p
        raise ConfigError(
            f"unknown profile {name!r} (searched {', '.join(map(str, self.dirs))}); "
            f"available: {', '.join(self.available()) or 'none'}"
        )

    def _resolved(
        self, path: Path, chain: tuple[str, ...]
    ) -> tuple[dict[str, Any], tuple[str, ...]]:
        """The merged document of `path` and the names of everything it extends, in order."""
        if len(chain) > MAX_EXTENDS_DEPTH:
            raise ConfigError(f"profile {path}: extends nests deeper than {MAX_EXTENDS_DEPTH}")
        doc = _read_doc(path)
        merged: dict[str, Any] = {}
        used: list[str] = []
        for parent in _parents(doc, path):
            if parent in chain or parent == path.stem:
                raise ConfigError(
                    f"profile {path}: extends {parent!r} forms a cycle ({' -> '.join(chain)})"
                )
            pdoc, pused = self._resolved(self._find(parent), (*chain, parent))
            pdoc.pop("name", None)
            pdoc.pop("description", None)
            merged = _deep_merge(merged, pdoc)
            used += [*pused, parent]
        merged = _deep_merge(merged, doc)
        merged.pop("extends", None)
        return merged, tuple(dict.fromkeys(used))

    def load_file(self, path: Path) -> Profile:
        doc, parents = self._resolved(path, (path.stem,))
        src = str(path) + (f" (extends {', '.join(parents)})" if parents else "")
        validate_profile(doc, src)
        if doc["name"] != path.stem:
            raise ConfigError(
                f"profile {path}: name {doc['name']!r} must match the file name {path.stem!r}"
            )
        return Profile(name=doc["name"], source=str(path), data=doc, extends=parents)

    def get(self, name: str) -> Profile:
        if name in self._cache:
            return self._cache[name]
        if name.startswith(FRAGMENT_PREFIX):
            raise ConfigError(f"{name!r} is a profile fragment (only for extends:), not a profile")
        prof = self._cache[name] = self.load_file(self._find(name))
        return prof


def load_profile_file(path: str | os.PathLike[str]) -> Profile:
    """One profile file; `extends:` looks in its own directory, then the shipped profiles."""
    p = Path(path)
    return ProfileLibrary([p.parent]).load_file(p)
