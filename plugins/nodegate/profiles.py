"""SKU profiles: YAML files validated against schemas/profile.schema.json at load time."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from nodegate.errors import ConfigError
from nodegate.inventory.yamlio import load_yaml


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    source: str
    data: Mapping[str, Any]

    def section(self, stage: str) -> Mapping[str, Any]:
        sec = self.data.get(stage)
        if not isinstance(sec, Mapping):
            raise ConfigError(f"profile {self.name} ({self.source}) has no {stage!r} section")
        return sec


@lru_cache(maxsize=1)
def profile_schema() -> dict[str, Any]:
    """The base schema plus every stage's section (schemas/profile.<stage>.schema.json).

    A fragment's `$defs` may refer to the base's shared definitions (`#/$defs/versionRule`).
    """
    root = resources.files("nodegate").joinpath("schemas")
    doc: dict[str, Any] = json.loads(root.joinpath("profile.schema.json").read_text("utf-8"))
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        name = entry.name
        if not (name.startswith("profile.") and name.endswith(".schema.json")):
            continue
        stage = name[len("profile.") : -len(".schema.json")]
        if stage == "schema" or not stage:
            continue
        frag: dict[str, Any] = json.loads(entry.read_text("utf-8"))
        frag.pop("$schema", None)
        doc["$defs"].update(frag.pop("$defs", {}))
        doc["properties"][stage] = frag
    return doc


def _where(err: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in err.absolute_path) or "(top level)"


def validate_profile(doc: Any, source: str) -> None:
    """Raise ConfigError naming the file and every offending key path."""
    validator = jsonschema.Draft202012Validator(profile_schema())
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        lines = [f"{_where(e)}: {e.message}" for e in errors[:10]]
        raise ConfigError(f"invalid profile {source}:\n  " + "\n  ".join(lines))


def load_profile_file(path: str | os.PathLike[str]) -> Profile:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read profile {p}: {exc}") from None
    doc: Any = load_yaml(str(p), text)
    validate_profile(doc, str(p))
    if doc["name"] != p.stem:
        raise ConfigError(f"profile {p}: name {doc['name']!r} must match the file name {p.stem!r}")
    return Profile(name=doc["name"], source=str(p), data=doc)


class ProfileLibrary:
    """Profiles by name from search directories (first hit wins)."""

    def __init__(self, dirs: Iterable[str | os.PathLike[str]]) -> None:
        self.dirs = [Path(d) for d in dirs]
        self._cache: dict[str, Profile] = {}

    def available(self) -> list[str]:
        names: set[str] = set()
        for d in self.dirs:
            if d.is_dir():
                names.update(p.stem for p in d.glob("*.yaml"))
        return sorted(names)

    def get(self, name: str) -> Profile:
        if name in self._cache:
            return self._cache[name]
        for d in self.dirs:
            p = d / f"{name}.yaml"
            if p.is_file():
                prof = self._cache[name] = load_profile_file(p)
                return prof
        raise ConfigError(
            f"unknown profile {name!r} (searched {', '.join(map(str, self.dirs))}); "
            f"available: {', '.join(self.available()) or 'none'}"
        )
