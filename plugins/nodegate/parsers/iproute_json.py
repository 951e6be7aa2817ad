"""Parsers for iproute2's JSON output: `ip -j addr show`, `ip -j route show table all`,
`ip -j rule show` (iproute2 >= 4.13 prints `-j`; shapes as captured with iproute2 6.1.0, see
tests/fixtures/formats/README.md). Only the keys the roce stage reads are typed; a document of
another shape is a ParseError.

>>> parse_ip_rules('[{"priority":100,"src":"10.100.0.1","table":"100"}]')[0].table
'100'
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass
from typing import Any

from nodegate.core.errors import ParseError


@dataclass(frozen=True, slots=True)
class IpAddress:
    family: str  # inet | inet6
    local: str
    prefixlen: int

    @property
    def interface(self) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface:
        return ipaddress.ip_interface(f"{self.local}/{self.prefixlen}")


@dataclass(frozen=True, slots=True)
class IpLink:
    """One interface of `ip -j addr show`."""

    ifname: str
    mtu: int
    operstate: str
    flags: tuple[str, ...]
    addresses: tuple[IpAddress, ...]

    def ipv4(self) -> tuple[IpAddress, ...]:
        return tuple(a for a in self.addresses if a.family == "inet")


@dataclass(frozen=True, slots=True)
class IpRoute:
    dst: str  # 'default' or a prefix
    dev: str | None
    table: str  # 'main' when iproute2 leaves it out
    gateway: str | None
    prefsrc: str | None
    type: str  # 'unicast' when left out


@dataclass(frozen=True, slots=True)
class IpRule:
    priority: int
    src: str  # 'all' or an address/prefix
    srclen: int | None
    table: str | None
    extra: tuple[tuple[str, str], ...]  # other selectors (iif, fwmark, ...) as printed


def _doc(tool: str, text: str) -> list[dict[str, Any]]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(tool, f"not JSON: {exc.msg} at line {exc.lineno} (truncated?)") from None
    if not isinstance(doc, list) or not all(isinstance(x, dict) for x in doc):
        raise ParseError(tool, "not a JSON list of objects")
    return doc


def _get(tool: str, obj: dict[str, Any], key: str, kind: type) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        raise ParseError(tool, f"{key!r} missing or not a {kind.__name__} in {str(obj)[:80]}")
    return value


def parse_ip_addr(text: str) -> tuple[IpLink, ...]:
    """`ip -j addr show`: every interface with its MTU, state and addresses."""
    tool = "ip -j addr"
    out = []
    for obj in _doc(tool, text):
        addrs = []
        for a in obj.get("addr_info", []):
            if not isinstance(a, dict):
                raise ParseError(tool, "addr_info holds a non-object")
            if "local" not in a:  # an address being deleted prints only its lifetimes
                continue
            addrs.append(
                IpAddress(
                    _get(tool, a, "family", str),
                    _get(tool, a, "local", str),
                    _get(tool, a, "prefixlen", int),
                )
            )
        out.append(
            IpLink(
                _get(tool, obj, "ifname", str),
                _get(tool, obj, "mtu", int),
                _get(tool, obj, "operstate", str),
                tuple(str(f) for f in obj.get("flags", [])),
                tuple(addrs),
            )
        )
    return tuple(out)


def parse_ip_routes(text: str) -> tuple[IpRoute, ...]:
    """`ip -j route show table all` (IPv4 and IPv6 routes of every table)."""
    tool = "ip -j route"
    return tuple(
        IpRoute(
            _get(tool, r, "dst", str),
            r.get("dev") if isinstance(r.get("dev"), str) else None,
            str(r.get("table", "main")),
            r.get("gateway") if isinstance(r.get("gateway"), str) else None,
            r.get("prefsrc") if isinstance(r.get("prefsrc"), str) else None,
            str(r.get("type", "unicast")),
        )
        for r in _doc(tool, text)
    )


def parse_ip_rules(text: str) -> tuple[IpRule, ...]:
    """`ip -j rule show`: policy rules in priority order."""
    tool = "ip -j rule"
    known = {"priority", "src", "srclen", "table"}
    rules = []
    for r in _doc(tool, text):
        srclen = r.get("srclen")
        if srclen is not None and not isinstance(srclen, int):
            raise ParseError(tool, f"srclen {srclen!r} is not a number")
        table = r.get("table")
        rules.append(
            IpRule(
                _get(tool, r, "priority", int),
                _get(tool, r, "src", str),
                srclen,
                None if table is None else str(table),
                tuple(sorted((k, str(v)) for k, v in r.items() if k not in known)),
            )
        )
    return tuple(rules)
