"""The JSON schemas nodegate ships (`schemas/<name>.schema.json`): loaded once, checked one way.

>>> [where(e) for e in problems("waivers", {"waivers": 1})]
['waivers']
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from functools import cache
from importlib import resources
from typing import Any

import jsonschema

SUFFIX = ".schema.json"


@cache
def load(name: str) -> dict[str, Any]:
    """The packaged schema `schemas/<name>.schema.json`, parsed once (do not change it)."""
    text = resources.files("nodegate").joinpath(f"schemas/{name}{SUFFIX}").read_text("utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc


def names() -> list[str]:
    """Every packaged schema's name, sorted: `["actions", "admission", ..., "waivers"]`."""
    root = resources.files("nodegate").joinpath("schemas")
    return sorted(e.name[: -len(SUFFIX)] for e in root.iterdir() if e.name.endswith(SUFFIX))


@cache
def _validator(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(load(name))


def validate(name: str, doc: object) -> None:
    """Check a document nodegate writes (a bug, not input, when it fails): raises
    jsonschema.ValidationError naming the schema file and the first key path wrong."""
    errors = problems(name, doc)
    if errors:
        e = errors[0]
        raise jsonschema.ValidationError(f"{name}{SUFFIX}: {where(e)}: {e.message}") from e


def problems(
    schema: str | Mapping[str, Any], doc: object, *, then_keyword: bool = False
) -> list[jsonschema.ValidationError]:
    """Every way `doc` breaks `schema` (a packaged name, or a schema), in key-path order;
    `then_keyword`: the same path's problems ordered by the schema keyword that failed."""
    if isinstance(schema, str):
        validator = _validator(schema)
    else:
        validator = jsonschema.Draft202012Validator(schema)
    if then_keyword:
        return sorted(
            validator.iter_errors(doc),
            key=lambda e: ([str(p) for p in e.absolute_path], str(e.validator)),
        )
    return sorted(validator.iter_errors(doc), key=lambda e: [str(p) for p in e.absolute_path])


def key_path(parts: Iterable[object]) -> str:
    """'nodes.gpu[001-004].ssh.port' from path parts; '(top level)' for the root."""
    return ".".join(str(p) for p in parts) or "(top level)"


def where(error: jsonschema.ValidationError) -> str:
    """The key path of the document where `error` is: `waivers.0.check`."""
    return key_path(error.absolute_path)
