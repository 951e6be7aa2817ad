"""Host keys as OpenSSH checks them: which known_hosts name a target is looked up under, and
how a learned key is written (HostKeyAlias, CheckHostIP, HashKnownHosts)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import os

from nodegate.transport.targets import Target


def lookup(target: Target, addr: str) -> tuple[str, str, int | None]:
    """(name, address, port) to match known_hosts with: under HostKeyAlias when set (no port),
    else the host name (`[host]:port` off port 22); the IP address only with CheckHostIP,
    which OpenSSH also skips for loopback."""
    if target.host_key_alias:
        name, port = target.host_key_alias, None
    else:
        name, port = target.hostname, target.port
    ip = addr if target.check_host_ip and not _is_loopback(addr) and addr != name else ""
    return name, ip, port


def known_hosts_line(target: Target, public_key: str) -> str:
    """The line accept-new appends for a learned key."""
    if target.host_key_alias:
        host = target.host_key_alias
    else:
        host = target.hostname if target.port == 22 else f"[{target.hostname}]:{target.port}"
    if target.hash_known_hosts:
        host = _hashed_host(host)
    return f"{host} {public_key.strip()}\n"


def _is_loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr.split("%")[0]).is_loopback
    except ValueError:
        return False


def _hashed_host(name: str) -> str:
    """OpenSSH's HashKnownHosts form: `|1|base64(salt)|base64(HMAC-SHA1(salt, name))`."""
    salt = os.urandom(20)
    digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"
