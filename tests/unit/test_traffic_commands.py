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
