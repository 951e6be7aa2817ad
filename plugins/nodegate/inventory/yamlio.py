"""Reading inventory files: text, safe YAML with duplicate-key detection, schema errors in words."""

from __future__ import annotations

import datetime
from typing import Any

import yaml

from nodegate.core import schemas
from nodegate.core.errors import ConfigError
from nodegate.core.schemas import key_path

MAX_YAML_DEPTH = 100  # nesting levels; PyYAML composes recursively (5,000 is a RecursionError)


class _StrictSafeLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys (PyYAML silently keeps the last one) and
    nesting deeper than MAX_YAML_DEPTH."""

    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"nested deeper than {MAX_YAML_DEPTH} levels",
                    self.peek_event().start_mark,  # type: ignore[no-untyped-call]
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _construct_mapping(loader: _StrictSafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: dict[object, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            first = seen.get(key)
        except TypeError:  # unhashable key: let the SafeConstructor report it
            continue
        if first is not None:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first at line {first})", key_node.start_mark
            )
        seen[key] = key_node.start_mark.line + 1
    return loader.construct_mapping(node, deep=True)


_StrictSafeLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping
)


class _TextDatesLoader(_StrictSafeLoader):
    """The same, reading `2026-12-31` as the text it is (PyYAML's date constructor raises for
    `2026-13-01` before anyone knows which key held it)."""


_TextDatesLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _StrictSafeLoader.yaml_implicit_resolvers.items()
}


# libyaml's parser (PyYAML's C extension) reads a 10,000-node inventory about ten times faster
# than the pure-Python scanner; the constructors (duplicate keys, text dates) are the same
# Python ones. The Python loader stays the reference: it reads a document nested near
# MAX_YAML_DEPTH (its depth check) and says every syntax error in its own words.
_FAST = bool(getattr(yaml, "__with_libyaml__", False))
if _FAST:

    class _CStrictSafeLoader(yaml.CSafeLoader):
        """_StrictSafeLoader's constructors over libyaml's parser."""

    _CStrictSafeLoader.add_constructor(
        yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping
    )

    class _CTextDatesLoader(_CStrictSafeLoader):
        """_TextDatesLoader over libyaml's parser."""

    _CTextDatesLoader.yaml_implicit_resolvers = _TextDatesLoader.yaml_implicit_resolvers


def _shallow(text: str) -> bool:
    """Whether no collection nests MAX_YAML_DEPTH - 1 deep (libyaml's events, no composing);
    False also for text libyaml cannot parse (the Python loader then says why)."""
    depth = 0
    opening = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
    closing = (yaml.MappingEndEvent, yaml.SequenceEndEvent)
    try:
        for ev in yaml.parse(text, Loader=yaml.CSafeLoader):
            if isinstance(ev, opening):
                depth += 1
                if depth >= MAX_YAML_DEPTH - 1:
                    return False
            elif isinstance(ev, closing):
                depth -= 1
    except yaml.YAMLError:
        return False
    return True


def read_text(source: str) -> str:
    """File contents; ConfigError for missing, unreadable, binary or empty files."""
    try:
        with open(source, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        raise ConfigError(f"{source}: inventory file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{source}: is a directory, not an inventory file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read inventory: {exc.strerror}") from None
    if not text.strip():
        raise ConfigError(f"{source}: empty inventory: the file has no content")
    return text


def load_yaml(source: str, text: str, *, dates: bool = True) -> object:
    """Safe-load YAML; syntax errors become ConfigError with the line and column. `dates`
    False: dates stay text, for the caller to check under their key."""
    loader: type = _StrictSafeLoader if dates else _TextDatesLoader
    if _FAST and _shallow(text):
        loader = _CStrictSafeLoader if dates else _CTextDatesLoader
    try:
        return yaml.load(text, Loader=loader)  # a SafeLoader: plain data only
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"
        raise ConfigError(f"{source}: {where}: YAML syntax error: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: YAML error: {exc}") from None


def check_string_keys(source: str, doc: object, path: tuple[object, ...] = ()) -> None:
    """Every mapping key must be a string (YAML turns `01:` or `yes:` into int/bool)."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            if not isinstance(key, str):
                raise ConfigError(
                    f"{source}: {key_path((*path, key))}: key {key!r} is {_kind(key)}, "
                    "not a string (quote it)"
                )
            check_string_keys(source, value, (*path, key))


_TYPE_WORDS = {
    "object": "a mapping",
    "array": "a list",
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "boolean": "a boolean",
    "null": "null",
}


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, datetime.date):
        return "a date"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _describe(error: Any) -> str:
    """One jsonschema error as 'key.path: what was wrong, what was expected'."""
    path = key_path(error.absolute_path)
    kind, value, schema, inst = error.validator, error.validator_value, error.schema, error.instance
    if "propertyNames" in error.schema_path:
        return f"{path}: invalid name {inst!r}: {schema.get('description', error.message)}"
    if kind == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        extra = sorted(str(k) for k in inst if k not in allowed)
        return (
            f"{key_path((*error.absolute_path, extra[0]))}: unknown key {extra[0]!r} "
            f"(expected one of: {', '.join(allowed)})"
        )
    if kind == "required":
        missing = [k for k in value if k not in inst]
        return f"{path}: missing required key {missing[0]!r}"
    if kind == "type":
        wanted = [value] if isinstance(value, str) else list(value)
        words = " or ".join(_TYPE_WORDS.get(w, w) for w in wanted)
        hint = " (quote it)" if "string" in wanted and not isinstance(inst, dict | list) else ""
        return f"{path}: expected {words}, got {_kind(inst)} {inst!r}{hint}"
    if kind in ("minimum", "maximum") and "maximum" not in schema:
        return f"{path}: {inst!r} out of range (expected a whole number >= {schema['minimum']})"
    if kind in ("minimum", "maximum"):
        return f"{path}: {inst!r} out of range (expected {schema['minimum']}..{schema['maximum']})"
    if kind == "exclusiveMinimum":
        return f"{path}: must be greater than {value}, got {inst!r}"
    if kind == "const":
        return f"{path}: unsupported value {inst!r} (expected {value!r})"
    if kind in ("minProperties", "minLength"):
        note = " (empty inventory: no nodes defined)" if path == "nodes" else ""
        return f"{path}: must not be empty{note}"
    if kind == "pattern":
        return f"{path}: invalid value {inst!r}: {schema.get('description', 'bad format')}"
    if kind == "oneOf" and "description" in schema:  # several spellings: say which are accepted
        return f"{path}: got {inst!r}, expected {schema['description']}"
    return f"{path}: {error.message}"


def validate_schema(source: str, doc: object) -> None:
    """Validate against inventory.schema.json; the first problem (by key path) is raised."""
    errors = schemas.problems("inventory", doc, then_keyword=True)
    if errors:
        more = len(errors) - 1
        tail = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
        raise ConfigError(f"{source}: {_describe(errors[0])}{tail}")
