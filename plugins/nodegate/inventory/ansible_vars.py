"""Ansible variables nodegate understands, mapped to inventory settings (others are ignored)."""

from __future__ import annotations

import re
import shlex

from nodegate.inventory.build import Flat, Setting, fail, resolve_path
from nodegate.inventory.sshtokens import convtime, split_args

# Preferred name first: ansible_host beats the old ansible_ssh_host alias.
_SSH_VARS = {
    "ansible_host": "host",
    "ansible_ssh_host": "host",
    "ansible_user": "user",
    "ansible_ssh_user": "user",
    "ansible_port": "port",
    "ansible_ssh_port": "port",
    "ansible_ssh_private_key_file": "identity_file",
    "ansible_private_key_file": "identity_file",
}
_ARGS_VARS = ("ansible_ssh_common_args", "ansible_ssh_extra_args")
_LABEL_VARS = ("rack", "leaf")
PROFILE_VAR = "nodegate_profile"
LABEL_PREFIX = "nodegate_label_"
MAPPED = frozenset({*_SSH_VARS, *_ARGS_VARS, *_LABEL_VARS, PROFILE_VAR})
_OPTION_RE = re.compile(r"^\s*([A-Za-z]+)\s*(?:=\s*|\s+)(.*)$")


def var_is_mapped(key: str) -> bool:
    """Whether nodegate reads this Ansible variable."""
    return key in MAPPED or (key.startswith(LABEL_PREFIX) and len(key) > len(LABEL_PREFIX))


def _text(source: str, var: str, s: Setting) -> str:
    if not isinstance(s.value, str) or not s.value:
        raise fail(source, s.where, f"{var} must be a non-empty string, got {s.value!r}")
    return s.value


def _convert(source: str, var: str, target: str, s: Setting, base_dir: str) -> Setting:
    if target == "port":
        value = s.value
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise fail(source, s.where, f"{var} must be an integer, got {s.value!r}")
        return Setting(value, s.where)
    text = _text(source, var, s)
    if target == "identity_file":
        text = resolve_path(text, base_dir)
    return Setting(text, s.where)


def _ssh_args(source: str, var: str, s: Setting, base_dir: str) -> Flat:
    """ProxyJump (-J, -o ProxyJump=), -F, UserKnownHostsFile, ConnectTimeout from ssh args."""
    try:
        tokens = shlex.split(_text(source, var, s))
    except ValueError as exc:
        raise fail(source, s.where, f"{var}: cannot split: {exc}") from None
    out: Flat = {}
    i = 0
    while i < len(tokens):
        flag = tokens[i][:2]
        if flag not in ("-J", "-o", "-F"):
            i += 1
            continue
        if len(tokens[i]) > 2:
            arg, i = tokens[i][2:], i + 1
        elif i + 1 < len(tokens):
            arg, i = tokens[i + 1], i + 2
        else:
            raise fail(source, s.where, f"{var}: {flag} without an argument")
        if flag == "-J":
            key, value = "proxyjump", arg
        elif flag == "-F":
            key, value = "ssh_config", arg
        else:
            m = _OPTION_RE.match(arg)
            if m is None:
                raise fail(source, s.where, f"{var}: cannot read option -o {arg!r}")
            key, value = m.group(1).lower(), m.group(2).strip()
        _ssh_option(source, var, s.where, key, value, base_dir, out)
    return out


def _ssh_option(
    source: str, var: str, where: str, key: str, value: str, base_dir: str, out: Flat
) -> None:
    # Like ssh itself, the first occurrence of an option wins.
    if key == "proxyjump":
        out.setdefault("ssh.proxy_jump", Setting(value, where))
    elif key == "proxycommand" and value.lower() != "none":
        raise fail(
            source, where, f"{var}: ProxyCommand is not supported; use -o ProxyJump=host or -J host"
        )
    elif key == "ssh_config":
        out.setdefault("ssh.ssh_config", Setting(resolve_path(value, base_dir), where))
    elif key == "userknownhostsfile":
        files = split_args(value)
        if files:
            out.setdefault("ssh.known_hosts", Setting(resolve_path(files[0], base_dir), where))
    elif key == "connecttimeout":
        seconds = convtime(value)
        if seconds is None:
            raise fail(source, where, f"{var}: bad ConnectTimeout {value!r}")
        if seconds > 0:
            out.setdefault("ssh.connect_timeout_s", Setting(float(seconds), where))


def _label(source: str, var: str, s: Setting) -> Setting:
    value = s.value
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise fail(source, s.where, f"{var} must be a string or a number, got {value!r}")
    return Setting(str(value), s.where)


def map_vars(source: str, variables: dict[str, Setting], base_dir: str) -> Flat:
    """Settings of one host from its resolved Ansible variables."""
    flat: Flat = {}
    for var, target in _SSH_VARS.items():
        if var in variables and f"ssh.{target}" not in flat:
            s = _convert(source, var, target, variables[var], base_dir)
            flat[f"ssh.{target}"] = s
    for var in _ARGS_VARS:
        if var in variables:
            for key, setting in _ssh_args(source, var, variables[var], base_dir).items():
                flat.setdefault(key, setting)
    if PROFILE_VAR in variables:
        profile = variables[PROFILE_VAR]
        flat["profile"] = Setting(_text(source, PROFILE_VAR, profile), profile.where)
    # rack/leaf first, so an explicit nodegate_label_rack takes precedence.
    for var in sorted(variables, key=lambda v: (v.startswith(LABEL_PREFIX), v)):
        if var in _LABEL_VARS:
            flat[f"labels.{var}"] = _label(source, var, variables[var])
        elif var.startswith(LABEL_PREFIX):
            flat[f"labels.{var[len(LABEL_PREFIX) :]}"] = _label(source, var, variables[var])
    return flat
