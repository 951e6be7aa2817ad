"""What the traffic stage spawns, rendered as the node's shell gets it (the companion of
test_rendered_commands.py, whose fixture pins the stages that predate the argv parts): the
server with its readiness loop, the client in duration mode, the counter read; hostile device,
netdev and address values quoted once, by the script renderer."""

from __future__ import annotations

from nodegate.profiles import ProfileLibrary
from nodegate.stages.ib_pairs.profile import Rail
from nodegate.stages.traffic.profile import traffic_profile
from nodegate.stages.traffic.run import RailPath, counters_command, perftest_argv, server_script
from nodegate.transport.script import command_line

from tests.integration.conftest import REPO

PROF = traffic_profile(ProfileLibrary([REPO / "inventories" / "profiles"]).get("hgx-h100-roce"))
ROCE = RailPath(Rail(3, "mlx5_3", 3, 0), "enp92s0np0", ("-x", "3", "--tclass", "106"))
HOSTILE = RailPath(Rail(1, "mlx5;$(x)", None, None), "en p'1", ())
# the InfiniBand VM profiles' criteria: incast aggregate, Jain, victim, bisection, per flow
IB_CRITERIA = (">= 0.9 share", ">= 0.9 Jain", ">= 0.8 share", ">= 0.85 share", ">= 0.75 share")
BASE = "-i 1 -p 19708 -s 65536 -D 10 -F --report_gbits"


def test_roce_rail_server_client_and_counters() -> None:
    port = PROF.port_base + 64 * 3 + 1  # rail 3, slot 1
    numa = "numactl --cpunodebind=0 --membind=0"
    assert command_line(server_script(ROCE, PROF, port)) == (
        f"{numa} ib_write_bw -d mlx5_3 {BASE} -x 3 --tclass 106 & p=$!\n"
        "while :; do\n"
        '  case "$(ss -Hltnp "sport = :19708" 2>/dev/null)" in *"pid=$p,"*) break ;; esac\n'
        '  kill -0 "$p" 2>/dev/null || { wait "$p"; exit $?; }\n'
        '  sleep 0.05\ndone\necho NODEGATE-PERFTEST-LISTENING\nwait "$p"'
    )
    assert command_line(perftest_argv(ROCE, PROF, port, "10.103.0.1")) == (
        f"{numa} ib_write_bw -d mlx5_3 {BASE} -x 3 --tclass 106 10.103.0.1"
    )
    assert command_line(counters_command(ROCE)) == (
        "ethtool -S enp92s0np0 && echo NODEGATE-TRAFFIC-RDMA-STATISTIC && rdma statistic show"
    )


def test_hostile_names_are_quoted_once() -> None:
    assert command_line(counters_command(HOSTILE)) == (
        "ethtool -S 'en p'\"'\"'1' && echo NODEGATE-TRAFFIC-RDMA-STATISTIC && rdma statistic show"
    )
    assert command_line(perftest_argv(HOSTILE, PROF, 19600, "bad addr;$(x)")) == (
        "ib_write_bw -d 'mlx5;$(x)' -i 1 -p 19600 -s 65536 -D 10 -F --report_gbits 'bad addr;$(x)'"
    )


def test_infiniband_vm_profiles_judge_bandwidth_fairness_and_the_victim() -> None:
    """The ND VMs' traffic sections (no fabric view, no RoCE counters): the line rate is the
    rail's own (hca.roles.compute.port.rate_gbps), the criteria the cited ones."""
    lib = ProfileLibrary([REPO / "inventories" / "profiles"])
    got = {}
    for name in ("nd-a100-v4", "nd-h100-v5", "nd-h200-v5"):
        prof = lib.get(name)
        t = traffic_profile(prof)
        rate = prof.section("hca")["roles"]["compute"]["port"]["rate_gbps"]["equal"]
        assert t.line_rate_gbps == rate, name
        cited = {"traffic.incast", "traffic.victim", "traffic.bisection"}
        assert cited <= set(prof.data["sources"]), name
        judged = (t.aggregate, t.fairness, t.victim, t.bisection, t.per_flow)
        got[name] = (t.line_rate_gbps, t.senders, t.counters, t.port_base,
                     tuple(j.describe() for j in judged))  # fmt: skip
    assert got == {
        "nd-a100-v4": (200.0, 8, None, 19515, IB_CRITERIA),
        "nd-h100-v5": (400.0, 8, None, 19515, IB_CRITERIA),
        "nd-h200-v5": (400.0, 8, None, 19515, IB_CRITERIA),
    }
