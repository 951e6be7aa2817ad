"""What the `gpu_load` stage runs on a node, as argument parts (the script renderer quotes):
the telemetry sampler, the loads, and the kernel log of the load's window. Roles name each
process's evidence (`raw/<node>/gpu_load.json#r1-<node>.<role>`)."""

from __future__ import annotations

from nodegate.core.values import Part
from nodegate.stages.gpu_load.profile import GpuLoadProfile

SAMPLER = "telemetry"  # nvidia-smi --query-gpu ... --format=csv -lms N, for the whole load
NVBANDWIDTH = "nvbandwidth"
DCGM = "dcgmi"
KERNEL_LOG = "kernel_log"  # journalctl -k since the first sample
TOPOLOGY = "topology"  # nvidia-smi topo -m, before the load: each GPU's NUMA node and switch

# The sampled fields, as nvidia-smi --help-query-gpu names them (corpus:
# nvidia-smi-help-query-gpu__driver590.48.01); `clocks_event_reasons.*` since driver 535
# (the older `clocks_throttle_reasons.*` are aliases).
FIELDS = (
    "timestamp",
    "index",
    "serial",
    "pci.bus_id",
    "clocks.current.sm",
    "clocks.max.sm",
    "clocks_event_reasons.active",
    "clocks_event_reasons.sw_power_cap",
    "clocks_event_reasons.hw_slowdown",
    "clocks_event_reasons.hw_thermal_slowdown",
    "clocks_event_reasons.hw_power_brake_slowdown",
    "clocks_event_reasons.sw_thermal_slowdown",
    "temperature.gpu",
    "power.draw",
    "ecc.errors.uncorrected.volatile.total",
)


def topology_argv() -> tuple[Part, ...]:
    return ("nvidia-smi", "topo", "-m")


def sampler_argv(p: GpuLoadProfile) -> tuple[Part, ...]:
    return (
        "nvidia-smi",
        "--query-gpu=" + ",".join(FIELDS),
        "--format=csv",
        "-lms",
        str(p.telemetry.interval_ms),
    )


def nvbandwidth_argv(p: GpuLoadProfile) -> tuple[Part, ...]:
    """One run of every selected testcase (`-t` takes several, run in order)."""
    return ("nvbandwidth", "-t", *p.run.testcases)


def dcgm_argv(p: GpuLoadProfile) -> tuple[Part, ...]:
    """`dcgmi diag -r <level> -j` with the burn duration of the two sustained plugins
    (`-p <plugin>.test_duration=<s>`, dcgmi diag's test parameters)."""
    d = p.run.burn_s
    params = f"targeted_stress.test_duration={d};targeted_power.test_duration={d}"
    return ("dcgmi", "diag", "-r", str(p.run.dcgm_level), "-p", params, "-j")


def kernel_log_argv(since: str) -> tuple[Part, ...]:
    """The kernel log from `since` (`YYYY-MM-DD HH:MM:SS`, node-local, the first sample)."""
    return ("journalctl", "-k", "-o", "short-iso", "--no-pager", "--since", since)
