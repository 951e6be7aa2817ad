"""The roce stage end to end over real SSH on the RoCE fleet model (inventories/sim/roce-demo.yaml):
one node per RoCE fault rejected for exactly its checks and rail, the healthy ones admitted,
fleet checks naming the majority; ib_pairs over the RoCE profile with its GID index and
traffic class."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from nodegate.transport.evidence import open_evidence, resolve_evidence

from tests.integration.conftest import REPO

pytestmark = pytest.mark.integration

NETDEV = {
    0: "enp24s0np0", 1: "enp58s0np0", 2: "enp75s0np0", 3: "enp92s0np0",
    4: "enp154s0np0", 5: "enp186s0np0", 6: "enp202s0np0", 7: "enp218s0np0",
}  # fmt: skip


def rail(i: int) -> str:
    return f"mlx5_{i} {NETDEV[i]} (rail {i})"


# node -> every (check, component, status) it is rejected for: the fault's check, and what the
# same misconfiguration shows from another angle (the fleet majority, a map not judged).
EXPECTED = {
    "gpu002": {
        ("roce.qos.trust", rail(3), "fail"),
        ("roce.qos.dscp_map", rail(3), "error"),
        ("roce.fleet.uniform", rail(3), "fail"),
    },
    "gpu003": {("roce.qos.pfc", rail(1), "fail"), ("roce.fleet.uniform", rail(1), "fail")},
    "gpu004": {("roce.qos.pfc", rail(5), "fail"), ("roce.fleet.uniform", rail(5), "fail")},
    "gpu005": {("roce.ecn", rail(2), "fail")},
    "gpu006": {("roce.mtu", rail(0), "fail"), ("roce.fleet.uniform", rail(0), "fail")},
    "gpu007": {
        ("roce.gid", rail(6), "fail"),
        ("roce.mode", rail(6), "fail"),
        ("roce.fleet.uniform", rail(6), "fail"),
    },
    "gpu008": {("roce.gid", rail(7), "fail"), ("roce.fleet.uniform", rail(7), "fail")},
    "gpu009": {("roce.ip.unique", rail(4), "fail")},  # its address is held by gpu010 too
    "gpu010": {("roce.ip.unique", rail(4), "fail")},
    "gpu011": {("roce.sysctl", rail(2), "fail")},
    "gpu012": {("roce.counters.pause", rail(3), "fail")},
    "gpu013": {("roce.counters.cnp", rail(0), "fail")},
    "gpu014": {("roce.counters.retransmits", rail(6), "fail")},
    "gpu015": {("roce.tos", rail(1), "fail")},
}
# (node, check) -> (observed, expected) of the fault's own verdict
OBSERVED = {
    ("gpu002", "roce.qos.trust"): ("trust pcp", "trust dscp"),
    ("gpu003", "roce.qos.pfc"): ("PFC off", "PFC on 3"),
    ("gpu004", "roce.qos.pfc"): ("PFC on 4", "PFC on 3"),
    ("gpu005", "roce.ecn"): (
        "ECN notification point off on prio 3; ECN reaction point off on prio 3",
        "prio 3: notification point on, reaction point on",
    ),
    ("gpu006", "roce.mtu"): (
        "netdev MTU 1500; RDMA active MTU 1024",
        "netdev MTU 9000, RDMA MTU 4096",
    ),
    ("gpu007", "roce.mode"): ("default_roce_mode IB/RoCE v1", "RoCE v2"),
    ("gpu007", "roce.gid"): (
        "index 3: no GID (no RoCE v2 GID at all (v1 only))",
        "index 3: RoCE v2 IPv4 10.106.0.7 on enp202s0np0",
    ),
    ("gpu008", "roce.gid"): (
        "index 3: RoCE v2 fd00:0000:0000:0000:966d:aeff:fe00:0747 on enp218s0np0 "
        "(RoCE v2 IPv4 GID at index 5)",
        "index 3: RoCE v2 IPv4 10.107.0.8 on enp218s0np0",
    ),
    ("gpu009", "roce.ip.unique"): ("10.104.0.9 also on gpu010 mlx5_4", "unique in the fleet"),
    ("gpu010", "roce.ip.unique"): ("10.104.0.9 also on gpu009 mlx5_4", "unique in the fleet"),
    ("gpu011", "roce.sysctl"): (
        "rp_filter=1",
        "arp_ignore 1, arp_announce 2, rp_filter one of 0, 2",
    ),
    ("gpu012", "roce.counters.pause"): (
        "rx_prio3_pause +184320; tx_prio3_pause +17",
        "rx_prio3_pause <= +0, tx_prio3_pause <= +0, tx_pause_storm_error_events <= +0",
    ),
    ("gpu013", "roce.counters.cnp"): (
        "np_cnp_sent +52311; rp_cnp_handled +17437",
        "np_cnp_sent <= +0, rp_cnp_handled <= +0",
    ),
    ("gpu014", "roce.counters.retransmits"): (
        "out_of_sequence +1207; packet_seq_err +41; local_ack_timeout_err +3",
        "out_of_sequence <= +0, packet_seq_err <= +0, local_ack_timeout_err <= +0, "
        "implied_nak_seq_err <= +0, rx_discards_phy <= +0",
    ),
    ("gpu015", "roce.tos"): ("default_roce_tos 0", "default_roce_tos 106"),
}


def roce_model(**extra: Any) -> dict[str, Any]:
    doc = yaml.safe_load((REPO / "inventories" / "sim" / "roce-demo.yaml").read_text())
    doc["name"] = "roce-test"
    doc.update(extra)
    return doc


def rejected_for(reasons: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(r["check"], r["component"], r["status"]) for r in reasons}


def test_roce_fleet_one_node_per_fault(sim_fleet: Any) -> None:
    run = sim_fleet(roce_model()).run("-m", "reach or roce")
    assert run.rc == 1, run.stdout[-3000:]
    rej = run.rejected()
    assert {n: rejected_for(rs) for n, rs in rej.items()} == EXPECTED
    # A -m run: the nodes it did not reject are not qualified (their policy needs every stage).
    assert run.passed() == ["gpu001", "gpu016", "gpu017", "gpu018", "gpu019", "gpu020"]
    for (node, check), (observed, expected) in OBSERVED.items():
        (r,) = [r for r in rej[node] if r["check"] == check]
        assert (r["observed"], r["expected"]) == (observed, expected), r
        assert r["remediation"] and r["evidence"], r
    # the fleet checks name the majority
    (uni,) = [r for r in rej["gpu002"] if r["check"] == "roce.fleet.uniform"]
    assert uni["message"] == (
        "mlx5_3 enp92s0np0: trust pcp; DSCP map 26->-, 48->- differs from the fleet: "
        "trust dscp (19/20); DSCP map 26->3, 48->6 (19/20)"
    )
    (uni,) = [r for r in rej["gpu008"] if r["check"] == "roce.fleet.uniform"]
    assert (uni["observed"], uni["expected"]) == ("RoCE v2 GID index 5", "RoCE v2 GID index 3")
    # counters read twice in one session, the profile's window between the reads
    (pause,) = [r for r in rej["gpu012"] if r["check"] == "roce.counters.pause"]
    assert pause["evidence"] == [
        "raw/gpu012/roce.json#stats_3",
        "raw/gpu012/roce.json#rdma_stat",
        "raw/gpu012/roce.json#stats_again_3",
        "raw/gpu012/roce.json#rdma_stat_again",
    ]
    first, again = (resolve_evidence(run.run_dir, e) for e in pause["evidence"][::2])
    assert "     rx_prio3_pause: 0\n" in first["stdout"]
    assert "     rx_prio3_pause: 184320\n" in again["stdout"]
    raw = open_evidence(run.run_dir / "raw" / "gpu001" / "roce.json")  # admitted: compressed
    assert raw["commands"]["counter_window"]["cmd"] == "sleep 2"


def test_roce_tool_faults_fail_closed(sim_fleet: Any) -> None:
    model = roce_model(
        nodes="gpu[001-004]",
        faults={
            "gpu002": [{"garbage": "mlnx_qos"}],
            "gpu003": [{"missing": "show_gids"}],
            "gpu004": [{"garbage": "rdma"}],
        },
    )
    run = sim_fleet(model).run("-m", "roce")
    rej = run.rejected()
    assert sorted(rej) == ["gpu002", "gpu003", "gpu004"], run.stdout[-2000:]
    qos = {r["check"] for r in rej["gpu002"] if r["status"] == "error"}
    assert qos == {"roce.qos.trust", "roce.qos.pfc", "roce.qos.dscp_map", "roce.qos.ets",
                   "roce.fleet.uniform"}  # fmt: skip
    (trust,) = [r for r in rej["gpu002"] if r["check"] == "roce.qos.trust"][:1]
    assert trust["message"].startswith("unrecognized output of `mlnx_qos -i ")
    assert {r["check"] for r in rej["gpu003"]} == {"roce.gid", "roce.fleet.uniform"}
    assert all(r["status"] == "error" for r in rej["gpu003"])
    assert {r["check"] for r in rej["gpu004"]} == {
        "roce.rail.link", "roce.counters.pause", "roce.counters.cnp",
        "roce.counters.retransmits",
    }  # fmt: skip
    assert all(r["status"] == "error" for r in rej["gpu004"])


def test_ib_pairs_over_roce_uses_gid_index_and_traffic_class(sim_fleet: Any) -> None:
    """ib_write_bw gets -x <gid_index> --tclass <traffic_class> from the profile; the simulated
    tool fails a rail whose GID index differs from the one given (gid_index_moved)."""
    model = roce_model(nodes="gpu[001-006]", faults={"gpu004": [{"gid_index_moved": "2"}]})
    run = sim_fleet(model).run("-m", "reach or ib_pairs")
    assert run.rc == 1, run.stdout[-3000:]
    rej = run.rejected()
    assert list(rej) == ["gpu004"]
    (r,) = rej["gpu004"]
    assert (r["check"], r["component"], r["status"]) == (
        "ib_pairs.rail.bandwidth",
        "mlx5_2 port 1 (rail 2)",
        "error",
    ), r
    own = resolve_evidence(run.run_dir, r["evidence"][0])
    assert (
        "nodegate-sim: " in own["stderr"] and "RoCE v2 IPv4 GID of mlx5_2 is 5" in (own["stderr"])
    )
    for node in ("gpu001", "gpu004"):
        raw = json.loads((run.run_dir / "raw" / node / "ib_pairs.json").read_text())
        cmds = [p["cmd"] for p in raw["commands"].values()]
        assert cmds and all(" -x 3 --tclass 106" in c for c in cmds), cmds
