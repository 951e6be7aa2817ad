"""Parser for `rdma statistic show [link <dev>/<port>]` (iproute2 rdma tool): each port's default
hw counters, in either layout the tool prints:

- one line per link, `link mlx5_0/1 rx_write_requests 0 ... np_cnp_sent 0`: iproute2 before
  6.8 without `-p`;
- the pretty layout, `link mana_0/1` then one indented `    <name> <value>` line per counter:
  `-p` before 6.8, and every run from 6.8 on (iproute2 commit 22edc0cf "rdma: use standard flag
  for json" dropped the `-p` test in `res_get_hwcounters`, which calls `newline_indent` before
  each counter). Corpus: rdma_statistic_p__mana-... (an Azure MANA VF).

Written from iproute2 rdma/stat.c (`stat_show_parse_cb`: `link %s/%u` then
`res_get_hwcounters`, one ` <name> <value>` pair per counter). The counter names are the driver's
hw_counters, taken as printed (mlx5: out_of_sequence, np_cnp_sent ...; MANA: requester_timeout,
received_cnps ...): the parser maps none of them, so a counter a driver does not have stays
absent (never 0) and whoever reads it by name sees it missing.

>>> parse_rdma_statistic("link mlx5_0/1 out_of_sequence 0 np_cnp_sent 5\\n")[("mlx5_0", 1)]
{'out_of_sequence': 0, 'np_cnp_sent': 5}
>>> parse_rdma_statistic("link mana_0/1\\n    received_cnps 3\\n")[("mana_0", 1)]
{'received_cnps': 3}
"""

from __future__ import annotations

import re

from nodegate.core.errors import ParseError
from nodegate.parsers.text import clean_lines

_TOOL = "rdma statistic"
_LINK = re.compile(r"^link\s+(?P<dev>[^\s/]+)/(?P<port>\d+)(?P<rest>(?:\s+\S+\s+\d+)*)$")
_COUNTER = re.compile(r"^\s+(?P<name>\S+)\s+(?P<value>\d+)$")  # pretty layout, indented


def parse_rdma_statistic(text: str) -> dict[tuple[str, int], dict[str, int]]:
    """(device, port) -> counter name -> value."""
    out: dict[tuple[str, int], dict[str, int]] = {}
    key: tuple[str, int] | None = None
    for lineno, line in enumerate(clean_lines(text), 1):
        if not line.strip():
            continue
        c = _COUNTER.match(line)
        if c is not None and key is not None:
            if c["name"] in out[key]:
                raise ParseError(_TOOL, f"line {lineno}: {c['name']} printed twice")
            out[key][c["name"]] = int(c["value"])
            continue
        _check_counted(out, key)
        m = _LINK.match(line.strip())
        if m is None:
            raise ParseError(_TOOL, f"line {lineno}: unrecognised line {line.strip()[:60]!r}")
        key = (m["dev"], int(m["port"]))
        if key in out:
            raise ParseError(_TOOL, f"line {lineno}: {m['dev']}/{m['port']} printed twice")
        tokens = m["rest"].split()
        out[key] = {tokens[i]: int(tokens[i + 1]) for i in range(0, len(tokens), 2)}
    _check_counted(out, key)
    if not out:
        raise ParseError(_TOOL, "no 'link <dev>/<port> <counter> <value> ...' line")
    return out


def _check_counted(out: dict[tuple[str, int], dict[str, int]], key: tuple[str, int] | None) -> None:
    """The link before the next one (or the end) printed at least one counter."""
    if key is not None and not out[key]:
        raise ParseError(_TOOL, f"no counters for {key[0]}/{key[1]}")
