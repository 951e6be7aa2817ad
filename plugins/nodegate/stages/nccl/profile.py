"""The `nccl` profile section, typed once per profile.

nccl:
  launcher: mpirun                     # or srun
  ranks_per_node: 8                    # one rank per GPU
  sweep: {min_bytes: 1048576, max_bytes: 8589934592, step_factor: 2}
  message_bytes: 8589934592            # busbw is judged at this size (a row of the sweep)
  iterations: 20
  warmup_iterations: 5
  floors:                              # busbw at message_bytes, and the sweep's average
    single_node: {busbw: {min: 430, unit: GB/s}, avg_busbw: {min: 100, unit: GB/s}}
    multi_node:                        # the entry with the most nodes <= the job's count
      - {nodes: 2, busbw: {min: 340, unit: GB/s}, avg_busbw: {min: 80, unit: GB/s}}
  env: {NCCL_IB_HCA: "=mlx5_0,mlx5_1"} # NCCL_*/UCX_* passed to every rank
  bootstrap_port: 61000                # NCCL_COMM_ID=<first node's data-plane address>:port
  single_node_jobs: true               # round 1: every node alone (false: the whole set first)
  single_node_timeout_s: 300
  job_timeout_s: 600                   # deadline of one multi-node job
  mpirun: {args: [], mca: {}}          # extra arguments, --mca parameters
  srun: {mpi: pmix, args: []}
  localization: {max_rounds: 4, group_nodes: 0, seed: 0}   # group_nodes 0: chosen from N
  matrix:                              # optional: collectives x scales after the whole set
    collectives: [all_reduce, alltoall]
    scales:                            # in curve order; each one round of disjoint groups
      two_node_ring: {message_bytes: 1073741824, iterations: 5}   # pairs, NCCL_ALGO=Ring
      leaf: {message_bytes: 1073741824, iterations: 5}            # groups inside one leaf
      leaves: {message_bytes: 1073741824, iterations: 5, leaves: 2}   # groups over 2 leaves
      whole: {message_bytes: 1073741824, iterations: 5}
    line_rate: {value: 400, unit: GB/s}   # per node: efficiency = busbw / line_rate
    max_drop_pct: 20                   # busbw may fall this much from one scale to the next
    floors: {all_reduce: {two_node_ring: {min: 340, unit: GB/s}, ...}, ...}
    seconds_per_gb: 0.05               # the time budget's model: one GB moved per rank
  transport:                           # optional: what NCCL must have chosen (NCCL_DEBUG=INFO)
    net: [IB]                          # `Using network X` / `via NET/X` allowed (IB, IBext, ...)
    gdr: required                      # required | any: GPU Direct RDMA on every NET channel
    nvls: any                          # expected | any: NVLS multicast available, nvls channels
    collnet: any                       # expected | any: CollNet / SHARP in use
    hcas: [mlx5_0, mlx5_1]             # optional: IB devices NCCL must use on every node
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from nodegate.core.errors import ConfigError
from nodegate.core.thresholds import Threshold
from nodegate.profiles import Profile
from nodegate.stages.roce.profile import roce_transport

SECTION = "nccl"


@dataclass(frozen=True, slots=True)
class Floors:
    """What one job must reach: busbw at the judged size and the sweep's average busbw."""

    busbw: Threshold
    avg_busbw: Threshold

    @classmethod
    def of(cls, doc: Mapping[str, Any], where: str) -> Floors:
        return cls(
            Threshold.from_profile(doc["busbw"], f"{where}.busbw"),
            Threshold.from_profile(doc["avg_busbw"], f"{where}.avg_busbw"),
        )

    def describe(self) -> str:
        return f"busbw {self.busbw.expected()} {self.busbw.unit}, avg {self.avg_busbw.expected()}"


@dataclass(frozen=True, slots=True)
class Sweep:
    min_bytes: int
    max_bytes: int
    step_factor: int


COLLECTIVES = {  # collective -> the nccl-tests binary that runs it
    "all_reduce": "all_reduce_perf",
    "all_gather": "all_gather_perf",
    "reduce_scatter": "reduce_scatter_perf",
    "alltoall": "alltoall_perf",
}
SCALES = ("two_node_ring", "leaf", "leaves", "whole")  # the curve's order, fewest nodes first


@dataclass(frozen=True, slots=True)
class Scale:
    """One point of the curve: its name, the size judged, iterations, leaves per group."""

    name: str
    message_bytes: int
    iterations: int
    leaves: int = 2  # `leaves` only: how many leaves one group spans


@dataclass(frozen=True, slots=True)
class Matrix:
    """The collective matrix (`nccl.matrix`): every collective at every scale, a floor each."""

    collectives: tuple[str, ...]
    scales: tuple[Scale, ...]
    line_rate: float  # GB/s per node
    max_drop_pct: float
    floors: Mapping[tuple[str, str], Threshold]  # (collective, scale) -> busbw floor
    seconds_per_gb: float

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> Matrix:
        where = f"{SECTION}.matrix"
        colls = tuple(str(c) for c in doc["collectives"])
        for c in colls:
            if c not in COLLECTIVES:
                raise ConfigError(
                    f"{where}.collectives: unknown collective {c!r} "
                    f"(one of {', '.join(COLLECTIVES)})"
                )
        scales = []
        for name, s in (doc["scales"] or {}).items():
            if name not in SCALES:
                raise ConfigError(
                    f"{where}.scales.{name}: unknown scale (one of {', '.join(SCALES)})"
                )
            scales.append(
                Scale(
                    str(name),
                    int(s["message_bytes"]),
                    int(s["iterations"]),
                    int(s.get("leaves", 2)),
                )
            )
        scales.sort(key=lambda s: SCALES.index(s.name))
        floors: dict[tuple[str, str], Threshold] = {}
        given = doc["floors"] or {}
        for c in colls:
            for sc in scales:
                key = f"{where}.floors.{c}.{sc.name}"
                got = (given.get(c) or {}).get(sc.name)
                if got is None:
                    raise ConfigError(f"{key}: no floor for this collective at this scale")
                floors[(c, sc.name)] = Threshold.from_profile(got, key)
        lr = doc["line_rate"]
        return cls(
            colls, tuple(scales), float(lr["value"]), float(doc["max_drop_pct"]), floors,
            float(doc.get("seconds_per_gb", 0.05)),
        )  # fmt: skip


TRANSPORT_MODES = {"gdr": ("required", "any"), "nvls": ("expected", "any"),
                   "collnet": ("expected", "any")}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Transport:
    """What NCCL must have chosen on every node (`nccl.transport`), read from NCCL_DEBUG=INFO."""

    net: tuple[str, ...]
    gdr: str = "any"
    nvls: str = "any"
    collnet: str = "any"
    hcas: tuple[str, ...] = ()

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> Transport:
        where = f"{SECTION}.transport"
        net = doc.get("net")
        if not isinstance(net, list) or not net or not all(isinstance(n, str) for n in net):
            raise ConfigError(f"{where}.net: a list of network names (IB, Socket, ...): {net!r}")
        modes = {}
        for key, allowed in TRANSPORT_MODES.items():
            v = doc.get(key, "any")
            if v not in allowed:
                raise ConfigError(f"{where}.{key}: {v!r} is not one of {', '.join(allowed)}")
            modes[key] = str(v)
        hcas = doc.get("hcas") or []
        if not isinstance(hcas, list) or not all(isinstance(h, str) for h in hcas):
            raise ConfigError(f"{where}.hcas: a list of IB device names, got {hcas!r}")
        return cls(tuple(net), modes["gdr"], modes["nvls"], modes["collnet"], tuple(hcas))


@dataclass(frozen=True, slots=True)
class NcclProfile:
    """The `nccl` section of one profile."""

    launcher: Literal["mpirun", "srun"]
    ranks_per_node: int
    sweep: Sweep
    message_bytes: int
    iterations: int
    warmup_iterations: int
    single_node: Floors
    multi_node: tuple[tuple[int, Floors], ...]  # (least nodes, floors), ascending
    env: tuple[tuple[str, str], ...]
    bootstrap_port: int
    single_node_timeout_s: float
    job_timeout_s: float
    mpirun_args: tuple[str, ...]
    mpirun_mca: tuple[tuple[str, str], ...]
    srun_mpi: str
    srun_args: tuple[str, ...]
    max_rounds: int
    group_nodes: int
    seed: int
    matrix: Matrix | None = None
    transport: Transport | None = None
    single_node_jobs: bool = True

    @classmethod
    def of(cls, sec: Mapping[str, Any]) -> NcclProfile:
        """From the schema-validated section."""
        floors = sec["floors"]
        multi = sorted(
            (int(e["nodes"]), Floors.of(e, f"{SECTION}.floors.multi_node[{e['nodes']}]"))
            for e in floors["multi_node"]
        )
        loc = sec.get("localization") or {}
        mpirun = sec.get("mpirun") or {}
        srun = sec.get("srun") or {}
        return cls(
            launcher="srun" if sec["launcher"] == "srun" else "mpirun",
            ranks_per_node=int(sec["ranks_per_node"]),
            sweep=Sweep(
                int(sec["sweep"]["min_bytes"]),
                int(sec["sweep"]["max_bytes"]),
                int(sec["sweep"]["step_factor"]),
            ),
            message_bytes=int(sec["message_bytes"]),
            iterations=int(sec["iterations"]),
            warmup_iterations=int(sec["warmup_iterations"]),
            single_node=Floors.of(floors["single_node"], f"{SECTION}.floors.single_node"),
            multi_node=tuple(multi),
            env=tuple(sorted((str(k), str(v)) for k, v in (sec.get("env") or {}).items())),
            bootstrap_port=int(sec["bootstrap_port"]),
            single_node_timeout_s=float(sec["single_node_timeout_s"]),
            job_timeout_s=float(sec["job_timeout_s"]),
            mpirun_args=tuple(str(a) for a in mpirun.get("args", ())),
            mpirun_mca=tuple(sorted((str(k), str(v)) for k, v in mpirun.get("mca", {}).items())),
            srun_mpi=str(srun.get("mpi", "none")),
            srun_args=tuple(str(a) for a in srun.get("args", ())),
            max_rounds=int(loc.get("max_rounds", 4)),
            group_nodes=int(loc.get("group_nodes", 0)),
            seed=int(loc.get("seed", 0)),
            matrix=Matrix.of(sec["matrix"]) if sec.get("matrix") else None,
            transport=Transport.of(sec["transport"]) if sec.get("transport") else None,
            single_node_jobs=bool(sec.get("single_node_jobs", True)),
        )

    def floors(self, nodes: int) -> Floors:
        """The floors of a job over `nodes` nodes: single-node, else the multi-node entry with
        the most nodes not above the job's count (the first entry for smaller jobs)."""
        if nodes <= 1:
            return self.single_node
        fit = [f for least, f in self.multi_node if least <= nodes]
        return fit[-1] if fit else self.multi_node[0][1]

    def describe(self, nodes: int) -> str:
        """The method and floor, as verdict messages show them."""
        return (
            f"all_reduce_perf {self.sweep.min_bytes}-{self.sweep.max_bytes} B x"
            f"{self.sweep.step_factor}, {self.ranks_per_node} ranks/node via {self.launcher}, "
            f"judged at {self.message_bytes} B; floor {self.floors(nodes).describe()}"
        )


def nccl_profile(profile: Profile) -> NcclProfile:
    """The typed `nccl` section of a profile, built once per profile."""
    prof = profile.typed(SECTION, NcclProfile.of)
    sources = profile.data.get("sources") or {}
    if prof.transport is not None and f"{SECTION}.transport" not in sources:
        raise ConfigError(
            f"profile {profile.name} ({profile.source}): {SECTION}.transport has no source "
            f"(sources: {SECTION}.transport)"
        )
    if prof.matrix is not None:
        sources = profile.data.get("sources") or {}
        for c, sc in prof.matrix.floors:
            key = f"{SECTION}.matrix.floors.{c}.{sc}"
            if key not in sources and f"{SECTION}.matrix.floors.{c}" not in sources:
                raise ConfigError(
                    f"profile {profile.name} ({profile.source}): {key} has no source "
                    f"(sources: {key} or {SECTION}.matrix.floors.{c})"
                )
    return prof


def roce_settings(profile: Profile) -> dict[str, str]:
    """NCCL_IB_GID_INDEX and NCCL_IB_TC from the profile's `roce` section, the same values
    the roce stage checks on every rail and ib_pairs passes to ib_write_bw (`-x`, `--tclass`);
    nothing for a profile without RoCE rails."""
    rt = roce_transport(profile)
    if rt is None:
        return {}
    return {"NCCL_IB_GID_INDEX": str(rt.gid_index), "NCCL_IB_TC": str(rt.traffic_class)}
