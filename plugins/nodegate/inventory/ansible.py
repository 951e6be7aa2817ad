"""Ansible inventories (INI and YAML) read into nodegate inventories, with Ansible precedence."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nodegate.core.errors import ConfigError
from nodegate.core.names import MAX_NODES, check_expression, too_many
from nodegate.inventory.ansible_vars import map_vars, var_is_mapped
from nodegate.inventory.build import Setting, build_inventory, check_name, fail
from nodegate.inventory.nodes import Inventory
from nodegate.inventory.yamlio import check_string_keys

_SECTION_RE = re.compile(r"^\[([^\]:\s]+)(?::([^\]\s]*))?\]\s*(?:[#;].*)?$")
_PORT_RE = re.compile(r"^(?P<host>.+?):(?P<port>\d+)$")
_GROUP_KEYS = ("children", "hosts", "vars")
_VAR_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"  # string.ascii_letters
_BRACKET_RE = re.compile(r"\[([^\]]*)\]")


def _bracket_size(body: str) -> int:
    """Names one [begin:end(:step)] range gives, counted without expanding; 1 if malformed."""
    bounds = body.split(":")
    if len(bounds) not in (2, 3):
        return 1
    beg, end = bounds[0] or "0", bounds[1]
    step = int(bounds[2]) if len(bounds) == 3 and bounds[2].isdigit() else 1
    if beg.isdigit() and end.isdigit():
        span = int(end) - int(beg)
    elif beg in _LETTERS and end in _LETTERS and len(beg) == len(end) == 1:
        span = _LETTERS.index(end) - _LETTERS.index(beg)
    else:
        return 1
    return max(1, span // max(step, 1) + 1)


def pattern_size(pattern: str) -> int:
    """How many names an Ansible host pattern expands to, counted before expanding it.

    >>> pattern_size("gpu[01:32]-ib[a:b]")
    64
    """
    size = 1
    for body in _BRACKET_RE.findall(pattern):
        size *= _bracket_size(body)
    return size


def _expand_range(pattern: str) -> list[str]:
    """Ansible's expand_hostname_range: gpu[01:32], rack[a:c], n[1:10:2], several brackets."""
    head, _, rest = pattern.partition("[")
    body, closed, tail = rest.partition("]")
    if not closed:
        raise ValueError("missing ']'")
    bounds = body.split(":")
    if len(bounds) not in (2, 3):
        raise ValueError(f"range [{body}] must be [begin:end] or [begin:end:step]")
    beg, end = bounds[0] or "0", bounds[1]
    step_text = bounds[2] if len(bounds) == 3 else "1"
    if not end or not step_text.isdigit() or int(step_text) < 1:
        raise ValueError(f"range [{body}] needs an end and a step >= 1")
    step = int(step_text)
    if beg.isdigit() and end.isdigit():
        width = len(beg) if beg.startswith("0") and len(beg) > 1 else 0
        if width and len(end) != width:
            raise ValueError(f"range [{body}]: begin and end must have the same width")
        if int(beg) > int(end):
            raise ValueError(f"range [{body}]: begin > end")
        items = [str(i).zfill(width) for i in range(int(beg), int(end) + 1, step)]
    elif beg in _LETTERS and end in _LETTERS and len(beg) == len(end) == 1:
        if _LETTERS.index(beg) > _LETTERS.index(end):
            raise ValueError(f"range [{body}]: begin > end")
        items = list(_LETTERS[_LETTERS.index(beg) : _LETTERS.index(end) + 1 : step])
    else:
        raise ValueError(f"range [{body}] must be numeric (01:32) or single letters (a:f)")
    out: list[str] = []
    for item in items:
        name = head + item + tail
        out.extend(_expand_range(name) if "[" in tail else [name])
    return out


def expand_host_pattern(pattern: str, limit: int = MAX_NODES) -> tuple[list[str], int | None]:
    """Host names and optional port of an Ansible host pattern ('gpu[01:04]:2222'); a pattern
    of more than `limit` names is refused before it is expanded.

    >>> expand_host_pattern("gpu[1:5:2]")
    (['gpu1', 'gpu3', 'gpu5'], None)
    """
    size = pattern_size(pattern)
    if size > limit:
        raise ValueError(too_many(size, limit, "hosts"))
    port = None
    m = _PORT_RE.match(pattern)
    if m is not None:
        pattern, port = m.group("host"), int(m.group("port"))
    if "[" not in pattern:
        if "]" in pattern:
            raise ValueError("']' without '['")
        return [pattern], port
    return _expand_range(pattern), port


@dataclass
class _Group:
    hosts: set[str] = field(default_factory=set)
    children: set[str] = field(default_factory=set)
    vars: dict[str, Setting] = field(default_factory=dict)


class _Tree:
    """Groups, hosts and their (mapped) variables as declared, before precedence."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.groups: dict[str, _Group] = {"all": _Group(), "ungrouped": _Group()}
        self.host_vars: dict[str, dict[str, Setting]] = {}

    def group(self, name: str, where: str) -> _Group:
        if name not in self.groups:
            check_name(self.source, where, "group", name)
            self.groups[name] = _Group()
        return self.groups[name]

    def set_var(self, table: dict[str, Setting], key: str, new: Setting, owner: str) -> None:
        if not var_is_mapped(key):
            return  # Ansible has many vars nodegate does not use: ignored
        old = table.get(key)
        if old is not None and old.value != new.value:
            raise fail(
                self.source,
                new.where,
                f"{owner} defined twice with conflicting settings: {key} is {new.value!r} "
                f"here but {old.value!r} at {old.where}",
            )
        table.setdefault(key, new)

    def add_hosts(
        self, group: str, pattern: str, variables: dict[str, Setting], where: str
    ) -> None:
        check_expression(f"{self.source}: {where}", pattern)
        try:
            # Every pattern counts against one limit for the whole inventory.
            names, port = expand_host_pattern(pattern, MAX_NODES - len(self.host_vars))
        except ValueError as exc:
            raise fail(self.source, where, f"bad host pattern {pattern!r}: {exc}") from None
        if port is not None:
            variables = {**variables, "ansible_port": Setting(port, where)}
        for name in names:
            check_name(self.source, where, "host", name)
            self.groups[group].hosts.add(name)
            table = self.host_vars.setdefault(name, {})
            for key, setting in variables.items():
                self.set_var(table, key, setting, f"host {name}")


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def load_ansible_ini(source: str, text: str) -> Inventory:
    """Read an Ansible INI inventory ([group], [group:vars], [group:children])."""
    tree = _Tree(source)
    group, kind = "ungrouped", "hosts"
    for lineno, raw in enumerate(text.splitlines(), 1):
        line, where = raw.strip(), f"line {lineno}"
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            m = _SECTION_RE.match(line)
            if m is None or (m.group(2) or "hosts") not in ("hosts", "vars", "children"):
                raise fail(source, where, f"bad section header {line!r}")
            group, kind = m.group(1), m.group(2) or "hosts"
            tree.group(group, where)
        elif kind == "hosts":
            try:
                tokens = shlex.split(line, comments=True)
            except ValueError as exc:
                raise fail(source, where, f"cannot split host line: {exc}") from None
            variables: dict[str, Setting] = {}
            for token in tokens[1:]:
                key, eq, value = token.partition("=")
                if not eq or not key:
                    raise fail(source, where, f"expected key=value after the host, got {token!r}")
                variables[key] = Setting(value, where)
            tree.add_hosts(group, tokens[0], variables, where)
        elif kind == "vars":
            key, eq, value = line.partition("=")
            if not eq or not _VAR_RE.match(key.strip()):
                raise fail(source, where, f"expected name=value in [{group}:vars], got {line!r}")
            setting = Setting(_unquote(value.strip()), where)
            tree.set_var(tree.groups[group].vars, key.strip(), setting, f"group {group}")
        else:
            tree.group(line, where)
            tree.groups[group].children.add(line)
    return _finish(tree, "ansible-ini")


def _walk(tree: _Tree, name: str, body: object, path: str) -> None:
    if body is None:
        return
    if not isinstance(body, dict):
        raise fail(tree.source, path, "expected a mapping with hosts:, vars:, children:")
    for key in body:
        if key not in _GROUP_KEYS:
            raise fail(tree.source, f"{path}.{key}", "unknown key (expected children, hosts, vars)")
    for key, value in body.items():
        if value is not None and not isinstance(value, dict):
            raise fail(tree.source, f"{path}.{key}", f"expected a mapping, got {value!r}")
    for pattern, hvars in (body.get("hosts") or {}).items():
        check_expression(f"{tree.source}: {path}.hosts", pattern)  # before it is in a key path
        if hvars is not None and not isinstance(hvars, dict):
            raise fail(tree.source, f"{path}.hosts.{pattern}", "host vars must be a mapping")
        where = f"{path}.hosts.{pattern}"
        variables = {k: Setting(v, f"{where}.{k}") for k, v in (hvars or {}).items()}
        tree.add_hosts(name, pattern, variables, where)
    for key, value in (body.get("vars") or {}).items():
        setting = Setting(value, f"{path}.vars.{key}")
        tree.set_var(tree.groups[name].vars, key, setting, f"group {name}")
    for child, child_body in (body.get("children") or {}).items():
        tree.group(child, f"{path}.children.{child}")
        tree.groups[name].children.add(child)
        _walk(tree, child, child_body, f"{path}.children.{child}")


def load_ansible_yaml(source: str, doc: Mapping[str, Any]) -> Inventory:
    """Read a parsed Ansible YAML inventory (all: {hosts:, vars:, children:})."""
    check_string_keys(source, doc)
    tree = _Tree(source)
    for name, body in doc.items():
        tree.group(name, name)
        _walk(tree, name, body, name)
    return _finish(tree, "ansible-yaml")


def _ancestors(tree: _Tree) -> dict[str, set[str]]:
    """Every group's ancestors; every group is under `all`; a children loop is an error."""
    parents: dict[str, set[str]] = {g: set() for g in tree.groups}
    for name, group in tree.groups.items():
        for child in group.children:
            parents[child].add(name)
    result: dict[str, set[str]] = {}

    def visit(g: str, stack: tuple[str, ...]) -> set[str]:
        if g in stack:
            loop = " -> ".join((*stack[stack.index(g) :], g))
            raise ConfigError(f"{tree.source}: group {g}: children loop: {loop}")
        if g not in result:
            found = {"all"} - {g}
            for p in parents[g]:
                found |= {p} | visit(p, (*stack, g))
            result[g] = found
        return result[g]

    for g in tree.groups:
        visit(g, ())
    return result


def _resolve(
    tree: _Tree, host: str, groups: set[str], anc: dict[str, set[str]]
) -> dict[str, Setting]:
    """Ansible precedence: host vars > child group > parent group; unrelated groups must agree."""
    chosen: dict[str, tuple[str, Setting]] = {}
    keys = {k for g in groups for k in tree.groups[g].vars}
    for key in sorted(keys):
        cands = [
            (g, tree.groups[g].vars[key]) for g in sorted(groups) if key in tree.groups[g].vars
        ]
        # A group overridden by one of its descendants drops out.
        live = [(g, s) for g, s in cands if not any(g in anc[g2] for g2, _ in cands)]
        for g2, s2 in live[1:]:
            g1, s1 = live[0]
            if s2.value != s1.value:
                raise fail(
                    tree.source,
                    s2.where,
                    f"host {host}: {key} is {s2.value!r} from group {g2} but {s1.value!r} from "
                    f"group {g1}, and neither group is a child of the other (conflict)",
                )
        chosen[key] = live[0]
    out = {k: s for k, (_, s) in chosen.items()}
    out.update(tree.host_vars.get(host, {}))
    return out


def _finish(tree: _Tree, fmt: str) -> Inventory:
    anc = _ancestors(tree)
    direct: dict[str, set[str]] = {h: set() for h in tree.host_vars}
    for name, group in tree.groups.items():
        for host in group.hosts:
            direct[host].add(name)
    for gs in direct.values():
        if not gs - {"all", "ungrouped"}:
            gs.add("ungrouped")
    members: dict[str, set[str]] = {g: set() for g in tree.groups}
    settings = {}
    base_dir = os.path.dirname(os.path.abspath(tree.source))
    for host in sorted(direct):
        groups = direct[host] | {a for g in direct[host] for a in anc[g]}
        for g in groups:
            members[g].add(host)
        settings[host] = map_vars(tree.source, _resolve(tree, host, groups, anc), base_dir)
    if not members["ungrouped"]:
        del members["ungrouped"]
    del members["all"]
    return build_inventory(tree.source, fmt, settings, members)
