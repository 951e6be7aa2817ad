"""The checks of stage `gpu_load`, in report order: copies (nvbandwidth), DCGM stress plugins,
telemetry under load, and the stray check after the stage (judged by the skeleton)."""

from __future__ import annotations

from nodegate.core.checks import Chart, Check, CheckTable
from nodegate.stages.gpu_load.checks_copy import check_d2d, check_d2h, check_h2d, check_local
from nodegate.stages.gpu_load.checks_stress import (
    check_memory_bandwidth,
    check_pulse,
    check_targeted_power,
    check_targeted_stress,
)
from nodegate.stages.gpu_load.checks_telemetry import (
    check_ecc,
    check_sm_clock,
    check_temperature,
    check_throttle,
    check_xid,
)
from nodegate.stages.gpu_load.profile import GpuLoadProfile
from nodegate.stages.gpu_load.reading import LoadFacts

C = Check[LoadFacts, GpuLoadProfile]

H2D_BANDWIDTH: C = Check(
    "gpu_load.h2d.bandwidth",
    "host->device copy bandwidth per GPU (nvbandwidth host_to_device_memcpy_ce) reaches the floor.",
    check_h2d,
    "GPU",
    "test_h2d_bandwidth",
    chart=Chart(10),
)
D2H_BANDWIDTH: C = Check(
    "gpu_load.d2h.bandwidth",
    "device->host copy bandwidth per GPU (nvbandwidth device_to_host_memcpy_ce) reaches the floor.",
    check_d2h,
    "GPU",
    "test_d2h_bandwidth",
    chart=Chart(11),
)
D2D_BANDWIDTH: C = Check(
    "gpu_load.d2d.bandwidth",
    "GPU<->GPU copy bandwidth (nvbandwidth device_to_device_memcpy_read_ce), each GPU by the "
    "median of its pairs, reaches the floor.",
    check_d2d,
    "GPU",
    "test_d2d_bandwidth",
    chart=Chart(12),
)
HBM_BANDWIDTH: C = Check(
    "gpu_load.hbm.bandwidth",
    "the GPU's local memory copy bandwidth (nvbandwidth device_local_copy) reaches the floor.",
    check_local,
    "GPU",
    "test_hbm_bandwidth",
    chart=Chart(13),
)
TARGETED_STRESS: C = Check(
    "gpu_load.dcgm.targeted_stress",
    "DCGM targeted_stress passes on every GPU.",
    check_targeted_stress,
    "GPU",
    "test_dcgm_targeted_stress",
)
TARGETED_POWER: C = Check(
    "gpu_load.dcgm.targeted_power",
    "DCGM targeted_power passes on every GPU and reaches the profile's power.",
    check_targeted_power,
    "GPU",
    "test_dcgm_targeted_power",
)
MEMORY_BANDWIDTH: C = Check(
    "gpu_load.dcgm.memory_bandwidth",
    "DCGM memory_bandwidth passes on every GPU.",
    check_memory_bandwidth,
    "GPU",
    "test_dcgm_memory_bandwidth",
)
PULSE: C = Check(
    "gpu_load.dcgm.pulse_test",
    "DCGM pulse_test (level 4) passes on every GPU.",
    check_pulse,
    "GPU",
    "test_dcgm_pulse_test",
)
THROTTLE: C = Check(
    "gpu_load.telemetry.throttle",
    "no thermal or power-brake clock event reason is active while the load runs.",
    check_throttle,
    "GPU",
    "test_no_throttle_under_load",
)
SM_CLOCK: C = Check(
    "gpu_load.telemetry.sm_clock",
    "the SM clock holds the profile's share of the GPU's max SM clock while the load runs.",
    check_sm_clock,
    "GPU",
    "test_sm_clock_under_load",
)
TEMPERATURE: C = Check(
    "gpu_load.telemetry.temperature",
    "the GPU stays under the profile's temperature while the load runs.",
    check_temperature,
    "GPU",
    "test_temperature_under_load",
)
ECC: C = Check(
    "gpu_load.telemetry.ecc",
    "no uncorrectable ECC error is counted while the load runs.",
    check_ecc,
    "GPU",
    "test_no_ecc_under_load",
)
XID: C = Check(
    "gpu_load.telemetry.xid",
    "no Xid is logged while the load runs.",
    check_xid,
    "GPU",
    "test_no_xid_under_load",
)
CLEANUP: C = Check(
    "gpu_load.cleanup",
    "no process of the load is left on the node after the stage.",
    None,
    "process",
    "test_no_stray_load",
    "pipeline",
)

CHECKS: CheckTable[LoadFacts, GpuLoadProfile] = CheckTable(
    "gpu_load",
    [
        H2D_BANDWIDTH,
        D2H_BANDWIDTH,
        D2D_BANDWIDTH,
        HBM_BANDWIDTH,
        TARGETED_STRESS,
        TARGETED_POWER,
        MEMORY_BANDWIDTH,
        PULSE,
        THROTTLE,
        SM_CLOCK,
        TEMPERATURE,
        ECC,
        XID,
        CLEANUP,
    ],
)
