"""What the `roce` stage runs on a node: command ids (they name the evidence,
`raw/<node>/roce.json#<id>`) and the kernel files it reads. The simulated fleet answers these
tools by their arguments and serves these files from the node's own tree.

Kernel files (one value each, read with `grep -H .`):
- `/sys/class/net/<if>/ecn/roce_np/enable/<prio>`, `.../roce_rp/enable/<prio>`,
  `.../roce_np/cnp_dscp`, `.../roce_np/cnp_802p_prio`: mlx5 ECN / DCQCN per priority (NVIDIA
  MLNX_OFED / DOCA-OFED user manual, "Explicit Congestion Notification (ECN)").
- `/sys/kernel/config/rdma_cm/<dev>/ports/<port>/default_roce_mode`, `default_roce_tos`:
  rdma_cm's defaults (kernel Documentation/ABI/testing/configfs-rdma_cm).
- `/proc/sys/net/ipv4/conf/{all,<if>}/{arp_ignore,arp_announce,rp_filter}` (kernel
  Documentation/networking/ip-sysctl.rst).
"""

from __future__ import annotations

from nodegate.stages.roce.profile import RoceProfile, RoceRail

RDMA_LINK = "rdma_link"
IP_ADDR = "ip_addr"
IP_ROUTE = "ip_route"
IP_RULE = "ip_rule"
GIDS = "show_gids"
FILES = "kernel_files"
RDMA_STAT = "rdma_stat"
SLEEP = "counter_window"
RDMA_STAT_AGAIN = "rdma_stat_again"

CMD_TIMEOUT_S = 15.0
PORT = 1  # RoCE rails are single-port functions (one RDMA device per netdev)
# grep: 1 = nothing matched, 2 = a named file missing: the lines it printed still count.
GREP_OK_RCS = (0, 1, 2)


def rail_id(kind: str, rail: RoceRail) -> str:
    """Command id of a per-rail command: `ethtool_3`, `mlnx_qos_3`, `stats_again_3`."""
    return f"{kind}_{rail.rail}"


def ecn_path(rail: RoceRail, point: str, prio: int) -> str:
    """`point`: roce_np (notification point) or roce_rp (reaction point)."""
    return f"/sys/class/net/{rail.netdev}/ecn/{point}/enable/{prio}"


def cnp_path(rail: RoceRail, name: str) -> str:
    """`name`: cnp_dscp or cnp_802p_prio."""
    return f"/sys/class/net/{rail.netdev}/ecn/roce_np/{name}"


def rdma_cm_path(rail: RoceRail, name: str) -> str:
    """`name`: default_roce_mode or default_roce_tos."""
    return f"/sys/kernel/config/rdma_cm/{rail.device}/ports/{PORT}/{name}"


def sysctl_path(iface: str, name: str) -> str:
    return f"/proc/sys/net/ipv4/conf/{iface}/{name}"


SYSCTLS = ("arp_ignore", "arp_announce", "rp_filter")


def kernel_files(prof: RoceProfile) -> list[str]:
    """Every kernel file the stage reads, in a stable order."""
    p = prof.qos.roce_priority
    out = [sysctl_path("all", s) for s in SYSCTLS]
    for r in prof.rails:
        out += [ecn_path(r, "roce_np", p), ecn_path(r, "roce_rp", p)]
        out += [cnp_path(r, "cnp_dscp"), cnp_path(r, "cnp_802p_prio")]
        out += [rdma_cm_path(r, "default_roce_mode"), rdma_cm_path(r, "default_roce_tos")]
        out += [sysctl_path(r.netdev, s) for s in SYSCTLS]
    return out
