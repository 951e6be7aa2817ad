"""Simulated tools of the `fabric` stage: what a node's infiniband-diags and flint answer from
the fleet's fabric (sim/fabric.py), in the formats of the programs that print them.

- `ibnetdiscover -p` (ibnetdiscover.c `dump_ports_report`, corpus ibnetdiscover__*): every
  switch port (high to low, unplugged ones with 36 blanks and the description), then every
  discovered CA port. Order: switches by LID, then CAs by LID; the real tool lists nodes in
  its discovery order from the observer, which no reader may rely on.
- `sminfo` (sminfo.c, corpus sminfo__*), `saquery SMIR` (saquery.c `dump_sm_info_record`).
- `perfquery -x -l <lid>` (perfquery.c, corpus perfquery__x-extended-edr-switch-allports): one
  extended block per port 1..N of the switch, counters at base + rate * t, t the seconds since
  the fleet was built (so two reads over a window differ by rate * window).
- `flint -d lid-<lid>,<ca>,<port> q` (mstflint flint/subcommands.cpp; corpus flint__q-*).

Every tool names the observer's port with `-C <ca> -P <port>` (or, for flint, in the device
string): a port that is not an active rail of this node fails as the real tools fail (their
IBEXIT line on stdout, rc 255). What every node answers alike lives once under the fleet's
`fabric/` (`write_shared`): the ports report, the SM answers, and a table of the switches from
which one awk prints a switch's counters or its flint answer. A node's tool reads them through
its node directory's link `fabric` (`$NG_NODE/fabric`, over SSH and under Slurm alike).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Iterator
from pathlib import Path

from nodegate.parsers.perfquery import EXT_ERRORS, EXT_TRAFFIC
from nodegate.sim.fabric import (
    BASE_FACTORS,
    LINK_RATES,
    SWITCH_PSID,
    SYMBOL_ERRORS_PER_S,
    XMIT_WAIT_STARVED_PER_S,
    Fabric,
    Link,
    Switch,
)
from nodegate.sim.fleet_model import SimNode
from nodegate.sim.tools.base import Provider, SimTool

_NO_PARTNER = " " * 36
CAP_MASK = "(CapMask: 0x5300 CapMask2: 0x0000002)"  # the corpus EDR switch's PMA
# perfquery -x's counters in the order it prints them (the parser's, from mad_dump_perfcounters*)
TRAFFIC, ERRORS = EXT_TRAFFIC, EXT_ERRORS
# Unicast packets count as the packets; the base of a counter that has one of its own.
_SAME_AS = {"PortUnicastXmitPkts": "PortXmitPkts", "PortUnicastRcvPkts": "PortRcvPkts"}


def _line(kind: str, lid: int, port: int, guid: str, link: Link, desc: str) -> str:
    head = f"{kind:>2} {lid:5d} {port:2d} {guid} {link.width} {link.speed or '???'}"
    r = link.remote
    if r is None:
        return f"{head}{_NO_PARTNER}'{desc}'"
    return f"{head} - {r.kind:>2} {r.lid:5d} {r.port:2d} {r.guid} ( '{desc}' - '{r.description}' )"


def ibnetdiscover_ports(fab: Fabric) -> str:
    """`ibnetdiscover -p` of the whole fabric."""
    out: list[str] = []
    for sw in fab.switches:
        for p in range(sw.ports, 0, -1):
            link = fab.ports.get((sw.lid, p)) or Link(None, "4x", None)
            out.append(_line("SW", sw.lid, p, sw.guid, link, sw.name))
    for ca in fab.cas:
        if ca.link.remote is not None:
            out.append(_line("CA", ca.lid, 1, ca.guid, ca.link, f"{ca.node} {ca.device}"))
    return "\n".join(out) + "\n"


_SM_NAMES = {0: "SMINFO_NOTACT", 1: "SMINFO_DISCOVER", 2: "SMINFO_STANDBY", 3: "SMINFO_MASTER"}


def sminfo(fab: Fabric) -> str:
    """sminfo's line for the SM the ports' SMLid names (the first master)."""
    sm = fab.sms[0]
    return (
        f"sminfo: sm lid {sm.lid} sm guid 0x{int(sm.guid, 16):x}, activity count "
        f"{sm.activity} priority {sm.priority} state {sm.state} {_SM_NAMES[sm.state]}\n"
    )


def saquery_smir(fab: Fabric) -> str:
    """`saquery SMIR`: one SMInfoRecord per SM."""
    return "".join(
        "SMInfoRecord dump:\n\t\tRID\n"
        f"\t\tLID...................{sm.lid}\n\t\tSMInfo dump:\n"
        f"\t\tGUID..................{sm.guid}\n"
        "\t\tSM_Key................0x0000000000000000\n"
        f"\t\tActCount..............{sm.activity}\n"
        f"\t\tPriority..............{sm.priority}\n"
        f"\t\tSMState...............{sm.state}\n"
        for sm in fab.sms
    )


def _field(name: str) -> str:
    return f"{name}:".ljust(33, ".")


def perfquery_rows(fab: Fabric, sw: Switch) -> Iterator[tuple[str, int | None, int]]:
    """(text, base, rate) per line of `perfquery -x -l <sw.lid>`: a line with base None is
    printed as is, the others as text + (base + rate * t)."""
    for p in range(1, sw.ports + 1):
        r = fab.rates(sw.lid, p)
        yield f"# Port extended counters: Lid {sw.lid} port {p} {CAP_MASK}", None, 0
        yield f"{_field('PortSelect')}{p}", None, 0
        yield f"{_field('CounterSelect')}0x0000", None, 0
        for name in TRAFFIC:
            src = _SAME_AS.get(name, name)
            yield _field(name), r.base.get(src, 0), r.rate.get(src, 0)
        yield f"{_field('CounterSelect2')}0x00000000", None, 0
        for name in ERRORS:
            yield _field(name), r.base.get(name, 0), r.rate.get(name, 0)


def perfquery_text(fab: Fabric, sw: Switch, t: int) -> str:
    """What `perfquery -x -l <lid>` prints t seconds after the fleet was built."""
    lines = [
        text if base is None else f"{text}{base + rate * t}"
        for text, base, rate in perfquery_rows(fab, sw)
    ]
    return "\n".join(lines) + "\n"


def flint_query(sw: Switch) -> str:
    """`flint -d lid-<lid>,... q` of a switch, laid out as the corpus flint q capture."""
    return (
        "Image type:            FS4\n"
        f"FW Version:            {sw.firmware}\n"
        "FW Release Date:       14.11.2024\n"
        "Description:           UID                GuidsNumber\n"
        f"Base GUID:             {sw.guid[2:]}        8\n"
        "Image VSD:             N/A\n"
        "Device VSD:            N/A\n"
        f"PSID:                  {SWITCH_PSID}\n"
        "Security Attributes:   secure-fw\n"
    )


def topology_key(fab: Fabric) -> dict[str, object]:
    """The answer key: switches, SMs and the healthy cabling (node -> rail -> switch, port)."""
    return {
        "switches": [
            {"name": s.name, "role": s.role, "guid": s.guid, "lid": s.lid, "firmware": s.firmware}
            for s in fab.switches
        ],
        "sms": [
            {"lid": m.lid, "guid": m.guid, "priority": m.priority, "state": m.state}
            for m in fab.sms
        ],
        "sm_running": fab.sm_running,
        "expected": {
            node: {str(r): {"switch": sw, "port": p} for r, (sw, p) in rails.items()}
            for node, rails in fab.expected.items()
        },
    }


def write_shared(fab: Fabric, root: Path, t0: int) -> None:
    """The fleet's `fabric/` files every node's tools read (written once per fleet)."""
    d = root / "fabric"
    d.mkdir(parents=True, exist_ok=True)
    (d / "t0").write_text(f"{t0}\n")
    (d / "ibnetdiscover-p.txt").write_text(ibnetdiscover_ports(fab))
    (d / "sminfo.txt").write_text(sminfo(fab))
    (d / "saquery-SMIR.txt").write_text(saquery_smir(fab))
    (d / "topology.json").write_text(json.dumps(topology_key(fab), indent=1) + "\n")
    (d / "perfquery.awk").write_text(PERFQUERY_AWK)
    rows = []
    for sw in fab.switches:
        linked = [p for p in range(1, sw.ports + 1) if _linked(fab, sw.lid, p)]
        symbol = sorted(p for lid, p in fab.symbol_error_ports if lid == sw.lid)
        starved = sorted(p for lid, p in fab.starved_ports if lid == sw.lid)
        lists = [",".join(map(str, c)) for c in (linked, symbol, starved)]
        rows.append("\t".join([str(sw.lid), str(sw.ports), *lists, sw.guid, sw.firmware]))
    (d / "switches.tsv").write_text("\n".join(rows) + "\n")
    (d / "flint.awk").write_text(FLINT_AWK)


def _linked(fab: Fabric, lid: int, port: int) -> bool:
    link = fab.ports.get((lid, port))
    return link is not None and link.remote is not None


def _perfquery_awk() -> str:
    """An awk program printing what perfquery_text prints, for `lid` at `t`, from one line of
    switches.tsv (LID, ports, linked ports, symbol-error ports, starved ports) and the ticks the
    flows under load added to ports' XmitWait (`xwfile`, fabric/traffic/xmit_wait.tsv, written
    by the simulated ib_write_bw from the flow model): the counters' formulas are Fabric.rates'
    tables plus those ticks, so a node's perfquery costs one awk, not a file per
    switch of pre-rendered counters."""
    lines = [
        'function pad(s) { s = s ":"; while (length(s) < 33) s = s "."; return s }',
        'BEGIN { FS = "\t" }',
        "$1 == lid { n = $2; found = 1",
        '  k = split($3, a, ","); for (i = 1; i <= k; i++) lk[a[i]] = 1',
        '  k = split($4, a, ","); for (i = 1; i <= k; i++) se[a[i]] = 1',
        '  k = split($5, a, ","); for (i = 1; i <= k; i++) sv[a[i]] = 1',
        "  exit }",
        "END { if (!found) exit 3",
        # the flow model's XmitWait under load: LID, port, ticks (sim/tools/traffic.py)
        "  while ((getline ln < xwfile) > 0) {",
        '    split(ln, f, "\t"); if (f[1] == lid) xw[f[2]] = f[3] }',
        "  for (p = 1; p <= n; p++) { L = (p in lk); S = (p in se); W = (p in sv)",
        "    seed = lid * 1000 + p",
        f'    print "# Port extended counters: Lid " lid " port " p " {CAP_MASK}"',
        '    print pad("PortSelect") p',
        '    print pad("CounterSelect") "0x0000"',
    ]
    for name in (*TRAFFIC, "", *ERRORS):
        if not name:
            lines.append('    print pad("CounterSelect2") "0x00000000"')
            continue
        src = _SAME_AS.get(name, name)
        base = f"L * seed * {BASE_FACTORS[src]}" if src in BASE_FACTORS else "0"
        if src == "PortXmitWait":  # and the ticks the flows under load added (xw[p])
            base += " + xw[p]"
            rate = f"(W ? {XMIT_WAIT_STARVED_PER_S} : L * {LINK_RATES[src]})"
        elif src == "SymbolErrorCounter":
            rate = f"S * {SYMBOL_ERRORS_PER_S}"
        else:
            rate = f"L * {LINK_RATES[src]}" if src in LINK_RATES else "0"
        lines.append(f'    printf "%s%.0f\\n", pad("{name}"), {base} + {rate} * t')
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


PERFQUERY_AWK = _perfquery_awk()


def _flint_awk() -> str:
    """An awk program printing flint_query of the switch at `lid` from its switches.tsv line
    (column 6 its GUID, 7 its firmware); exit 3 when no switch has that LID."""
    template = flint_query(Switch("", "", "0x@GUID@", 0, 0, "@FW@"))
    prints = []
    for line in template.splitlines():
        text = '"' + line.replace("\\", "\\\\").replace('"', '\\"') + '"'
        text = text.replace("@FW@", '" $7 "').replace("@GUID@", '" substr($6, 3) "')
        prints.append(f"  print {text}")
    body = "\n".join(prints)
    return f'BEGIN {{ FS = "\\t" }}\n$1 == lid {{ found = 1\n{body}\n  exit }}\n' + (
        "END { if (!found) exit 3 }\n"
    )


FLINT_AWK = _flint_awk()


# -- the node's tools ---------------------------------------------------------------------

_PORT_ARGS = """ng_ca= ng_port= ng_x= ng_next= ng_rest=
for ng_a do
  case $ng_next in
    C) ng_ca=$ng_a; ng_next=; continue ;;
    P) ng_port=$ng_a; ng_next=; continue ;;
  esac
  case $ng_a in
    -C|--Ca) ng_next=C ;;
    -P|--Port) ng_next=P ;;
    -*) ng_rest="$ng_rest $ng_a" ;;
    *) ng_rest="$ng_rest $ng_a" ;;
  esac
done
[ -z "$ng_next" ] || ng_x=1
ng_rest=${ng_rest# }
ng_fab=$NG_NODE/fabric"""


def _port_check(tool: str, up: list[str], down: list[str], down_cmd: str = "") -> str:
    """Shell: the named port (default the first active rail) is an active rail of this node,
    else the real tool's failure: on a down port its IBEXIT line with `$ng_down`, or
    `down_cmd`."""
    first = up[0] if up else "mlx5_0:1"
    ca, _, port = first.partition(":")
    up_pat = "|".join(shlex.quote(p) for p in up) or "ng-none"
    down_pat = "|".join(shlex.quote(p) for p in down) or "ng-none"
    t = shlex.quote(tool)
    ibexit = "printf '%s: iberror: failed: %s\\n' " + t + ' "$ng_down"'
    return f"""[ -n "$ng_ca" ] || ng_ca={ca}
[ -n "$ng_port" ] || ng_port={port}
case "$ng_ca:$ng_port" in
  {up_pat}) ;;
  {down_pat}) {down_cmd or ibexit}
    return 255 ;;
  *) printf "%s: iberror: failed: Failed to open '%s' port '%s'\\n" {t} "$ng_ca" "$ng_port"
     return 255 ;;
esac"""


_DISCOVER_FAILED = "printf 'ibnetdiscover: iberror: failed: discover failed\\n\\n'"
# ibdiag_sa.c sa_get_handle on a port without an SM LID (it prints "" for a named CA), then
# saquery's IBPANIC (libibmad mad.h: `ibpanic: [pid] func: msg: %m`).
_SA_UNBOUND = (
    "printf 'ibwarn: [%s] sa_get_handle: No SM/SA found on port :%s\\n' $$ \"$ng_port\" >&2; "
    "printf 'ibpanic: [%s] main: Failed to bind to the SA: Success\\n' $$ >&2"
)


def _ports(node: SimNode, fab: Fabric) -> tuple[list[str], list[str]]:
    mine = fab.by_node.get(node.name, ())
    up = [f"{c.device}:1" for c in mine if c.link.remote is not None]
    down = [f"{c.device}:1" for c in mine if c.link.remote is None and c.present]
    return up, down


def _no_sm(tool: str, lid: int) -> str:
    """Shell: what a tool that asks the SM prints when no SM answers at its LID."""
    if tool == "saquery":  # saquery.c get_any_records; main returns the errno (ETIMEDOUT)
        return (
            "printf 'ibwarn: [%s] sa_query: umad_recv failed: attr 0x18: Connection timed "
            "out\\n\\nQuery SA failed: Connection timed out\\n' $$ >&2; return 110"
        )
    return (
        f"printf 'ibwarn: [%s] mad_rpc: _do_madrpc failed; dport (Lid {lid})\\n' $$ >&2; "
        "printf 'sminfo: iberror: failed: query\\n'; return 255"
    )


def tools(node: SimNode, fab: Fabric) -> Iterable[SimTool]:
    """The observer tools of `node` (every node can observe: the stage picks one)."""
    up, down = _ports(node, fab)
    sm_lid = fab.sms[0].lid
    yield SimTool(
        "ibnetdiscover",
        {},
        prelude="\n".join(
            [
                _PORT_ARGS,
                'case "$ng_rest" in -p|--ports) ;; *) ng_x=1 ;; esac',
                'if [ -z "$ng_x" ]; then',
                # ibnetdiscover.c: IBEXIT("discover failed\n"), a newline of its own
                _port_check("ibnetdiscover", up, down, _DISCOVER_FAILED),
                '/bin/cat "$ng_fab/ibnetdiscover-p.txt"; return $?',
                "fi",
            ]
        ),
    )
    for tool, want, answer in (("sminfo", "", "sminfo"), ("saquery", "SMIR", "saquery-SMIR")):
        body = f'/bin/cat "$ng_fab/{answer}.txt"; return $?'
        if not fab.sm_running:
            body = _no_sm(tool, sm_lid)
        yield SimTool(
            tool,
            {},
            prelude="\n".join(
                [
                    _PORT_ARGS,
                    f'[ "$ng_rest" = {shlex.quote(want)} ] || ng_x=1',
                    'if [ -z "$ng_x" ]; then ng_down=query',
                    _port_check(tool, up, down, _SA_UNBOUND if tool == "saquery" else ""),
                    body,
                    "fi",
                ]
            ),
        )
    yield SimTool(
        "perfquery",
        {},
        prelude="\n".join(
            [
                _PORT_ARGS,
                "set -f; set -- $ng_rest; set +f; ng_lid=",
                'case "$1 $2" in "-x -l"|"-l -x") [ $# -eq 3 ] && ng_lid=$3 ;; esac',
                'case "$ng_lid" in ""|*[!0-9]*) ng_x=1 ;; esac',
                'if [ -z "$ng_x" ]; then ng_down="smp query nodeinfo failed"',
                _port_check("perfquery", up, down),
                'ng_t0=$(/bin/cat "$ng_fab/t0"); ng_now=$(/bin/date +%s)',
                '/usr/bin/awk -v lid="$ng_lid" -v t=$((ng_now - ng_t0)) '
                '-v xwfile="$ng_fab/traffic/xmit_wait.tsv" '
                '-f "$ng_fab/perfquery.awk" "$ng_fab/switches.tsv"; ng_rc=$?',
                "if [ $ng_rc = 3 ]; then  # no switch at that LID: the NodeInfo query times out",
                "  printf 'ibwarn: [%s] mad_rpc: _do_madrpc failed; dport (Lid %s)\\n' $$ "
                '"$ng_lid" >&2',
                "  printf 'perfquery: iberror: failed: smp query nodeinfo failed\\n'; return 255",
                "fi",
                "return $ng_rc",
                "fi",
            ]
        ),
    )
    yield SimTool("flint", {}, prelude=_flint_prelude(up, down))


def _flint_prelude(up: list[str], down: list[str]) -> str:
    ok = "|".join(shlex.quote(p.replace(":", ",")) for p in up) or "ng-none"
    return f"""ng_fab=$NG_NODE/fabric
case "$#:$1:$3" in
  3:-d:q|3:-d:query) ;;
  *) printf '%s\\n' '-E- Unknown command or bad arguments. Run flint -h for usage.'; return 1 ;;
esac
ng_lid=${{2#lid-}}; ng_lid=${{ng_lid%%,*}}; ng_via=${{2#lid-"$ng_lid"}}; ng_via=${{ng_via#,}}
case "$ng_via" in
  {ok}) ;;
  *) printf '%s\\n' "-E- Cannot open Device: $2. No such device or address."; return 1 ;;
esac
case "$2:$ng_lid" in
  lid-*:*[!0-9]*|lid-*:) printf '%s\\n' "-E- Cannot open Device: $2. Invalid argument."
    return 1 ;;
esac
/usr/bin/awk -v lid="$ng_lid" -f "$ng_fab/flint.awk" "$ng_fab/switches.tsv"; ng_rc=$?
if [ $ng_rc = 3 ]; then  # no switch at that LID
  printf '%s\\n' "-E- Cannot open Device: $2. Connection timed out."; return 1
fi
return $ng_rc"""


# The fabric's node faults are listed with the other providers' (sim/tools/__init__.py);
# its tools come from the fleet's fabric (sim/fleet.py), not from one node's model.
def _no_tools(node: SimNode) -> Iterable[SimTool]:
    return ()


def _provider() -> Provider:
    from nodegate.sim.fabric import FAULTS

    return Provider(name="fabric", tools=_no_tools, faults=FAULTS)


PROVIDER = _provider()
