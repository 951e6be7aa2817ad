"""Parser for `rdma statistic show link <dev>/<port>` (iproute2 rdma tool): the port's default
hw counters, one line per link: `link mlx5_0/1 rx_write_requests 0 ... np_cnp_sent 0`.

Written from iproute2 rdma/stat.c (`stat_show_parse_cb`: `link %s/%u` then
`res_get_hwcounters`, one ` <name> <value>` pair per counter); the counter names are the
driver's hw_counters (mlx5: out_of_sequence, packet_seq_err, np_cnp_sent, rp_cnp_handled ...,
the same names show_counters prints from sysfs, corpus show_counters__*).

>>> parse_rdma_statistic("link mlx5_0/1 out_of_sequence 0 np_cnp_sent 5\\n")[("mlx5_0", 1)]
{'out_of_sequence': 0, 'np_cnp_sent': 5}
"""

from __future__ import annotations

import re

from nodegate.core.errors import ParseError
from nodegate.parsers.text import clean_lines

_TOOL = "rdma statistic"
_LINK = re.compile(r"^link\s+(?P<dev>[^\s/]+)/(?P<port>\d+)(?P<rest>(?:\s+\S+\s+\d+)*)$")


def parse_rdma_statistic(text: str) -> dict[tuple[str, int], dict[str, int]]:
    """(device, port) -> counter name -> value."""
    out: dict[tuple[str, int], dict[str, int]] = {}
    for lineno, raw in enumerate(clean_lines(text), 1):
        line = raw.strip()
        if not line:
            continue
        m = _LINK.match(line)
        if m is None:
            raise ParseError(_TOOL, f"line {lineno}: unrecognised line {line[:60]!r}")
        tokens = m["rest"].split()
        counters = {tokens[i]: int(tokens[i + 1]) for i in range(0, len(tokens), 2)}
        if not counters:
            raise ParseError(_TOOL, f"line {lineno}: no counters for {m['dev']}/{m['port']}")
        key = (m["dev"], int(m["port"]))
        if key in out:
            raise ParseError(_TOOL, f"line {lineno}: {m['dev']}/{m['port']} printed twice")
        out[key] = counters
    if not out:
        raise ParseError(_TOOL, "no 'link <dev>/<port> <counter> <value> ...' line")
    return out
