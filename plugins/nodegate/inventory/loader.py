"""Load an inventory file: detect its format; read nodegate YAML inventories."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from typing import Any

from ClusterShell.NodeSet import RESOLVER_NOGROUP
from ClusterShell.NodeUtils import GroupResolver

from nodegate.core.drainlimit import DrainLimit
from nodegate.core.errors import ConfigError
from nodegate.core.names import MAX_NODES, check_expression
from nodegate.inventory.ansible import load_ansible_ini, load_ansible_yaml
from nodegate.inventory.build import (
    PATH_KEYS,
    Flat,
    Setting,
    build_inventory,
    check_name,
    fail,
    merge_level,
    overlay,
    resolve_path,
)
from nodegate.inventory.nodes import Inventory, InventorySettings
from nodegate.inventory.select import StrictGroupSource, UnknownGroupError, fold, parse_nodeset
from nodegate.inventory.yamlio import check_string_keys, load_yaml, read_text, validate_schema

_INI_SECTION = re.compile(r"^\s*\[[^\]\s]+\]\s*(?:[#;].*)?$", re.MULTILINE)
_ANSIBLE_GROUP_KEYS = frozenset({"hosts", "vars", "children"})


def load_inventory(path: str | os.PathLike[str]) -> Inventory:
    """Read a nodegate YAML, Ansible YAML or Ansible INI inventory (format detected)."""
    source = os.fspath(path)
    text = read_text(source)
    try:
        doc: object = load_yaml(source, text)
        yaml_error: ConfigError | None = None
    except ConfigError as exc:
        doc, yaml_error = None, exc
    if isinstance(doc, dict):
        if "version" in doc or "nodes" in doc:
            return load_nodegate(source, doc)
        if "all" in doc or _looks_like_ansible_yaml(doc):
            return load_ansible_yaml(source, doc)
        keys = ", ".join(sorted(map(str, doc))) or "none"
        raise ConfigError(
            f"{source}: cannot tell the inventory format (top-level keys: {keys}); expected "
            "a nodegate inventory (version:, nodes:) or an Ansible YAML inventory (all:)"
        )
    if _INI_SECTION.search(text) or source.endswith(".ini"):
        return load_ansible_ini(source, text)
    if yaml_error is not None:
        raise yaml_error
    raise ConfigError(
        f"{source}: not an inventory: expected a YAML mapping (nodegate or Ansible YAML) "
        "or an Ansible INI file with [group] sections"
    )


def _looks_like_ansible_yaml(doc: Mapping[Any, Any]) -> bool:
    """Top-level groups without `all:` (Ansible allows it): every value is a group body."""
    bodies = list(doc.values())
    return bool(bodies) and all(
        b is None or (isinstance(b, dict) and set(b) <= _ANSIBLE_GROUP_KEYS) for b in bodies
    )


def _flatten(spec: Mapping[str, Any] | None, where: str, base_dir: str) -> Flat:
    """Settings mapping (profile/labels/ssh/data_plane) -> flat keys with their key paths."""
    flat: Flat = {}
    if not spec:
        return flat
    if "profile" in spec:
        flat["profile"] = Setting(spec["profile"], f"{where}.profile")
    for key, value in (spec.get("labels") or {}).items():
        flat[f"labels.{key}"] = Setting(value, f"{where}.labels.{key}")
    for key, value in (spec.get("ssh") or {}).items():
        name = "ssh.connect_timeout_s" if key == "connect_timeout" else f"ssh.{key}"
        if name in PATH_KEYS:
            value = resolve_path(value, base_dir)
        flat[name] = Setting(value, f"{where}.ssh.{key}")
    plane = spec.get("data_plane") or {}
    if "address" in plane:
        flat["data_plane.address"] = Setting(plane["address"], f"{where}.data_plane.address")
    for rail, value in (plane.get("rails") or {}).items():
        flat[f"data_plane.rails.{rail}"] = Setting(value, f"{where}.data_plane.rails.{rail}")
    return flat


def _expand_key(source: str, key: str, limit: int) -> list[str]:
    """Node names of one `nodes:` key (a ClusterShell hostlist expression), at most `limit`."""
    check_expression(f"{source}: nodes", key)  # before `key` is shown in a key path
    where = f"{source}: nodes.{key}"
    if "@" in key:
        raise ConfigError(f"{where}: groups cannot define nodes; put @groups under groups:")
    hint = " (nodegate uses gpu[01-32]; gpu[01:32] is Ansible syntax)" if ":" in key else ""
    try:
        names = parse_nodeset(key, RESOLVER_NOGROUP, where, limit)
    except ConfigError as exc:
        raise ConfigError(f"{exc}{hint}") from None
    if not names:
        raise ConfigError(f"{where}: expands to no nodes")
    for name in names:
        check_name(source, f"nodes.{key}", "node", name)
    return names


class _ExpanderSource(StrictGroupSource):
    """Group source whose members come from a _GroupExpander (recursive, loop-checked)."""

    def __init__(self, expander: _GroupExpander) -> None:
        super().__init__({}, expander.names)
        self.expander = expander

    def members(self, group: str) -> list[str]:
        """Members of `group`, expanding it first if needed."""
        return self.expander.members(group)


class _GroupExpander:
    """Resolves group membership expressions, following @references, detecting loops."""

    def __init__(self, source: str, groups: Mapping[str, Any], names: list[str]) -> None:
        self.source, self.groups, self.names = source, groups, names
        self.known = set(names)
        self.done: dict[str, list[str]] = {"all": names}
        self.stack: list[str] = []
        self.resolver = GroupResolver(_ExpanderSource(self))

    def members(self, group: str) -> list[str]:
        """Node names of `group` (ConfigError for unknown nodes or a loop)."""
        if group in self.done:
            return self.done[group]
        if group not in self.groups:
            raise UnknownGroupError(group)
        where = f"{self.source}: groups.{group}.nodes"
        if group in self.stack:
            loop = " -> ".join([*self.stack[self.stack.index(group) :], group])
            raise ConfigError(f"{where}: group membership loop: {loop}")
        self.stack.append(group)
        found = parse_nodeset(self.groups[group]["nodes"], self.resolver, where)
        self.stack.pop()
        unknown = [n for n in found if n not in self.known]
        if unknown:
            raise ConfigError(f"{where}: {fold(unknown)} not defined under nodes:")
        self.done[group] = found
        return found


def load_nodegate(source: str, doc: Mapping[str, Any]) -> Inventory:
    """Build an Inventory from a parsed nodegate YAML document (defaults < groups < nodes)."""
    check_string_keys(source, doc)
    validate_schema(source, doc)
    base_dir = os.path.dirname(os.path.abspath(source))
    defaults = _flatten(doc.get("defaults"), "defaults", base_dir)
    entries: dict[str, list[tuple[str, Flat]]] = {}
    expanded = 0
    for key, spec in doc["nodes"].items():
        flat = _flatten(spec, f"nodes.{key}", base_dir)
        # Every key counts against one limit: many keys of 100,000 nodes each are refused too.
        names = _expand_key(source, key, MAX_NODES - expanded)
        expanded += len(names)
        for name in names:
            entries.setdefault(name, []).append((f"nodes.{key}", flat))
    groups: Mapping[str, Any] = doc.get("groups") or {}
    if "all" in groups:
        raise fail(source, "groups.all", "'all' is implicit (every node); use another name")
    expander = _GroupExpander(source, groups, list(entries))
    members = {g: expander.members(g) for g in groups}
    layers: dict[str, list[tuple[str, Flat]]] = {n: [] for n in entries}
    for group, names in members.items():
        flat = _flatten(groups[group], f"groups.{group}", base_dir)
        for name in names:
            layers[name].append((f"groups.{group}", flat))
    settings = {
        name: overlay(
            defaults,
            merge_level(layers[name], name, source),
            merge_level(entries[name], name, source),
        )
        for name in entries
    }
    inventory = build_inventory(source, "nodegate", settings, members)
    run = doc.get("settings") or {}  # schema-checked: known keys, whole numbers >= 1
    limit, drain = run.get("max_active"), run.get("max_drain")
    try:
        bound = None if drain is None else DrainLimit.of_data(drain)
    except ValueError as exc:  # `0%`, `150%`: the schema's pattern lets them through
        raise fail(source, "settings.max_drain", f"got {drain!r}, expected {exc}") from None
    return dataclasses.replace(
        inventory,
        settings=InventorySettings(
            None if limit is None else int(limit),
            bound,
        ),
    )
