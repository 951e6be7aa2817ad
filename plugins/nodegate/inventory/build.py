"""Format-independent inventory building: merge settings layers, validate, make nodes."""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from nodegate.core.errors import ConfigError
from nodegate.core.names import check_name as _check_name
from nodegate.inventory.nodes import (
    DataPlane,
    FrozenMap,
    Inventory,
    Node,
    RailCable,
    SSHSettings,
    natural_key,
)
from nodegate.inventory.sshconfig import SSHConfig
from nodegate.inventory.sshtokens import check_proxy_jump

# No whitespace or control character; a leading '-' could pass as an option (fullmatch only).
_WORD_RE = re.compile(r"[^\s\-][^\s\x00-\x1f\x7f]*")
PATH_KEYS = ("ssh.identity_file", "ssh.ssh_config", "ssh.known_hosts")


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting value and where it came from (key path or 'line N')."""

    value: object
    where: str


Flat = dict[str, Setting]  # keys: "profile", "ssh.port", "labels.rack", ...


def fail(source: str, where: str, message: str) -> ConfigError:
    """A ConfigError naming the file and the key path or line."""
    return ConfigError(f"{source}: {where}: {message}")


def resolve_path(value: str, base_dir: str) -> str:
    """Absolute path: ~ expanded, relative paths taken from the inventory file's directory."""
    return os.path.normpath(os.path.join(base_dir, os.path.expanduser(value)))


def merge_level(layers: Sequence[tuple[str, Flat]], node: str, source: str) -> Flat:
    """Merge layers of equal precedence; one key given two different values is an error."""
    out: Flat = {}
    origin: dict[str, str] = {}
    for name, flat in layers:
        for key, setting in flat.items():
            prev = out.get(key)
            if prev is None:
                out[key], origin[key] = setting, name
            elif prev.value != setting.value:
                raise fail(
                    source,
                    setting.where,
                    f"node {node}: {key} is {setting.value!r} from {name} but "
                    f"{prev.value!r} from {origin[key]} (conflict: set it in one place)",
                )
    return out


def overlay(*flats: Flat) -> Flat:
    """Later layers override earlier ones key by key."""
    out: Flat = {}
    for flat in flats:
        out.update(flat)
    return out


def check_name(source: str, where: str, what: str, name: str) -> None:
    """Reject names that cannot serve as ids/paths (spaces, '/', leading '-', newlines)."""
    _check_name(f"{source}: {where}", what, name)


def _text(source: str, s: Setting, key: str) -> str:
    if not isinstance(s.value, str) or not s.value:
        raise fail(source, s.where, f"{key} must be a non-empty string, got {s.value!r}")
    return s.value


def _word(source: str, s: Setting, key: str) -> str:
    value = _text(source, s, key)
    if not _WORD_RE.fullmatch(value):
        raise fail(source, s.where, f"{key} {value!r} must be one word, not starting with '-'")
    return value


def _port(source: str, s: Setting) -> int:
    if isinstance(s.value, bool) or not isinstance(s.value, int):
        raise fail(source, s.where, f"port must be an integer, got {s.value!r}")
    if not 1 <= s.value <= 65535:
        raise fail(source, s.where, f"port {s.value} out of range (expected 1..65535)")
    return s.value


def _timeout(source: str, s: Setting) -> float:
    v = s.value
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
        raise fail(source, s.where, f"connect_timeout must be a number of seconds > 0, got {v!r}")
    return float(v)


def make_ssh(source: str, flat: Flat) -> SSHSettings:
    """Validated SSHSettings from the ssh.* keys of a merged layer (paths already resolved)."""
    s = {k[4:]: v for k, v in flat.items() if k.startswith("ssh.")}
    jump = _word(source, s["proxy_jump"], "proxy_jump") if "proxy_jump" in s else None
    if jump is not None and (problem := check_proxy_jump(jump)):
        raise fail(source, s["proxy_jump"].where, f"proxy_jump: {problem}")
    return SSHSettings(
        host=_word(source, s["host"], "host") if "host" in s else None,
        user=_word(source, s["user"], "user") if "user" in s else None,
        port=_port(source, s["port"]) if "port" in s else None,
        identity_file=_text(source, s["identity_file"], "identity_file")
        if "identity_file" in s
        else None,
        ssh_config=_text(source, s["ssh_config"], "ssh_config") if "ssh_config" in s else None,
        known_hosts=_text(source, s["known_hosts"], "known_hosts") if "known_hosts" in s else None,
        connect_timeout_s=_timeout(source, s["connect_timeout_s"])
        if "connect_timeout_s" in s
        else None,
        proxy_jump=jump,
    )


def _ip(source: str, s: Setting, key: str) -> str:
    value = _text(source, s, key)
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise fail(source, s.where, f"{value!r} is not an IP address (IPv4 or IPv6)") from None


def make_data_plane(source: str, flat: Flat) -> DataPlane:
    """Validated data-plane addresses from the data_plane.* keys of a merged layer."""
    address = flat.get("data_plane.address")
    rails: dict[int, str] = {}
    for key, setting in flat.items():
        if key.startswith("data_plane.rails."):
            rail = key[len("data_plane.rails.") :]
            if not rail.isdigit() or not rail.isascii():
                raise fail(source, setting.where, f"rail {rail!r} is not a rail number (0, 1, ...)")
            rails[int(rail)] = _ip(source, setting, f"rail {rail} address")
    cables: dict[int, RailCable] = {}
    for key, setting in flat.items():
        if key.startswith("data_plane.cables."):
            rail, _, what = key[len("data_plane.cables.") :].partition(".")
            if not rail.isdigit() or not rail.isascii():
                raise fail(source, setting.where, f"rail {rail!r} is not a rail number (0, 1, ...)")
            have = cables.get(int(rail), RailCable())
            if what == "switch":
                have = dataclasses.replace(have, switch=_switch(source, setting))
            else:
                have = dataclasses.replace(have, port=_switch_port(source, setting))
            cables[int(rail)] = have
    return DataPlane(
        address=_ip(source, address, "address") if address is not None else None,
        rails=FrozenMap(sorted(rails.items())),
        cables=FrozenMap(sorted(cables.items())),
    )


def _switch(source: str, s: Setting) -> str:
    """A switch's name as its node description reads (`leaf-r01-rail3`): printable, no quote."""
    value = _text(source, s, "switch")
    if not value.isprintable() or "'" in value or value != value.strip() or len(value) > 64:
        raise fail(source, s.where, f"{value!r} is not a switch name (printable, no quote, <= 64)")
    return value


def _switch_port(source: str, s: Setting) -> int:
    v = s.value
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 255:
        raise fail(source, s.where, f"switch port {v!r} out of range (expected 1..255)")
    return v


def make_node(source: str, name: str, groups: Iterable[str], flat: Flat) -> Node:
    """A validated Node from its merged settings."""
    labels: dict[str, str] = {}
    for key, setting in flat.items():
        if key.startswith("labels."):
            label = key[len("labels.") :]
            check_name(source, setting.where, "label", label)
            labels[label] = _text(source, setting, f"label {label}")
    profile = flat.get("profile")
    if profile is not None:
        check_name(source, profile.where, "profile", _text(source, profile, "profile"))
    return Node(
        name=name,
        groups=tuple(sorted(set(groups) | {"all"})),
        labels=FrozenMap(sorted(labels.items())),
        profile=str(profile.value) if profile is not None else None,
        ssh=make_ssh(source, flat),
        data_plane=make_data_plane(source, flat),
    )


def _check_ssh_configs(source: str, settings: Mapping[str, Flat]) -> None:
    """Parse every distinct ssh_config once, so a missing/bad file fails at load time."""
    seen: set[object] = set()
    for flat in settings.values():
        setting = flat.get("ssh.ssh_config")
        if setting is None or setting.value in seen:
            continue
        seen.add(setting.value)
        try:
            SSHConfig.load(str(setting.value))
        except ConfigError as exc:
            raise fail(source, setting.where, str(exc)) from None


def build_inventory(
    source: str, fmt: str, settings: Mapping[str, Flat], groups: Mapping[str, Iterable[str]]
) -> Inventory:
    """Validate merged per-node settings and group membership into an Inventory."""
    if not settings:
        raise ConfigError(f"{source}: empty inventory: no nodes defined")
    _check_ssh_configs(source, settings)
    order = sorted(settings, key=natural_key)
    for group in groups:
        check_name(source, "groups", "group", group)
    members: dict[str, set[str]] = {g: set(ns) for g, ns in groups.items()}
    members["all"] = set(order)
    node_groups: dict[str, list[str]] = {n: [] for n in order}
    for group, names in members.items():
        for n in names:
            node_groups[n].append(group)
    nodes = tuple(make_node(source, n, node_groups[n], settings[n]) for n in order)
    table = {g: tuple(sorted(ns, key=natural_key)) for g, ns in sorted(members.items())}
    return Inventory(source=source, format=fmt, nodes=nodes, groups=FrozenMap(table))
