"""One nccl campaign: the nodes of one profile, single-node jobs, the whole set, localization."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ClusterShell.NodeSet import NodeSet

from nodegate.core.thresholds import Threshold
from nodegate.core.values import Verdict
from nodegate.framework.active.addresses import PeerAddress, peer_address
from nodegate.framework.active.campaign import Campaign, EvidenceRefs, Execution, Spawner
from nodegate.framework.active.rounds import Sanity
from nodegate.inventory import Node
from nodegate.stages.fabric.discovered import Cabling, node_leaf
from nodegate.stages.nccl.checks import Judge, matrix_results
from nodegate.stages.nccl.launch import job_env, mpirun_script, run_mpirun, run_srun
from nodegate.stages.nccl.matrix import curve
from nodegate.stages.nccl.plan import (
    NcclJob,
    NcclLocalizer,
    auto_group_nodes,
    estimate_s,
    matrix_plan,
)
from nodegate.stages.nccl.profile import NcclProfile
from nodegate.stages.nccl.results import JobReading, read_job
from nodegate.transport.base import Transport
from nodegate.transport.scontrol import SLURM_NAME_LABEL


class NcclCampaign(Campaign[NcclJob]):
    """Units: nodes. Tests: all_reduce_perf jobs over disjoint groups of nodes."""

    def __init__(
        self,
        name: str,
        prof: NcclProfile,
        members: Sequence[Node],
        transport: Transport,
        extra_env: Mapping[str, str],
        cabling: Cabling | None = None,
        uplinks: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.name = name
        self.prof = prof
        self.nodes = tuple(n.name for n in members)
        # The fabric this run discovered (node -> device -> leaf), else the `leaf` labels.
        self.cabling: Cabling = cabling or {}
        self.uplinks = uplinks or {}
        leaf = {
            n.name: node_leaf(self.cabling, n.name, sorted(self.cabling.get(n.name, {})))
            or n.labels.get("leaf", "")
            for n in members
        }
        self.localizer: NcclLocalizer = NcclLocalizer(
            self.nodes,
            leaf,
            max_rounds=prof.max_rounds,
            group_nodes=prof.group_nodes,
            seed=prof.seed,
            matrix=prof.matrix,
            single_node_jobs=prof.single_node_jobs,
        )
        self.performance = prof.single_node.busbw  # per job: see passes()
        self.extra_env = dict(extra_env)
        # Where ranks reach each node: its data-plane address, not SSH's.
        self.addresses: dict[str, PeerAddress] = {
            n.name: peer_address(n, None, transport) for n in members
        }
        self.readings: dict[NcclJob, JobReading] = {}
        self.transport = transport
        # How Slurm knows each node (srun's -w, mpirun's hostfile inside the allocation)
        self.slurm_names = {n.name: n.labels.get(SLURM_NAME_LABEL) or n.name for n in members}

    def plan_header(self) -> dict[str, Any]:
        n = len(self.nodes)
        return {
            "launcher": self.prof.launcher,
            "ranks_per_node": self.prof.ranks_per_node,
            "message_bytes": self.prof.message_bytes,
            "group_nodes": self.prof.group_nodes or auto_group_nodes(n),
            "max_localization_rounds": self.prof.max_rounds,
            **self.matrix_header(),
            "addresses": {k: a.doc() for k, a in self.addresses.items()},
        }

    def matrix_header(self) -> dict[str, Any]:
        """The matrix's rounds and modelled wall time, as planned over every node (before the
        first round runs; the nodes still in after localization run it)."""
        m = self.prof.matrix
        if m is None:
            return {}
        rounds = matrix_plan(m, self.nodes, self.localizer.loc.leaf)
        return {
            "matrix": {
                "collectives": list(m.collectives),
                "scales": [s.name for s in m.scales],
                "rounds": len(rounds),
                "jobs": sum(len(r) for r in rounds),
                "estimated_s": estimate_s(m, self.nodes, self.localizer.loc.leaf),
            }
        }

    def plan_note(self) -> str | None:
        """`collective matrix: 6 rounds, 14 jobs, estimated 60 s (after localization)`."""
        m = self.matrix_header().get("matrix")
        if m is None:
            return None
        return (
            f"collective matrix: {m['rounds']} rounds, {m['jobs']} jobs, estimated "
            f"{m['estimated_s']:g} s (after localization, on the nodes still in)"
        )

    def floor_of(self, test: NcclJob) -> Threshold:
        """The busbw floor of a job: its (collective, scale) in the matrix, else by size."""
        if test.phase == "matrix" and self.prof.matrix is not None:
            return self.prof.matrix.floors[(test.collective, test.scale)]
        return self.prof.floors(len(test.nodes)).busbw

    def message_bytes(self, test: NcclJob) -> int:
        if test.phase == "matrix" and self.prof.matrix is not None:
            return next(s for s in self.prof.matrix.scales if s.name == test.scale).message_bytes
        return self.prof.message_bytes

    def doc_of(self, test: NcclJob) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "phase": test.phase,
            "nodes": str(NodeSet.fromlist(list(test.nodes))),
            "count": len(test.nodes),
            "launched_from": test.nodes[0],
            "floor": self.prof.floors(len(test.nodes)).describe(),
        }
        if test.phase == "matrix":
            doc["collective"], doc["scale"] = test.collective, test.scale
            doc["floor"] = f"busbw {self.floor_of(test).expected()} {self.floor_of(test).unit}"
        if test.subject is not None:
            doc["subject"], doc["partner"] = test.subject, test.partner
        return doc

    def nodes_of(self, test: NcclJob) -> tuple[str, ...]:
        return test.nodes

    def key_of(self, test: NcclJob) -> str:
        return test.key

    def channels(self, test: NcclJob) -> int:
        # mpirun on the job's first node, or srun on the controller: one process. Resources
        # are the default, each of the job's nodes: a node takes part in one job at a time.
        return 1

    def timeout_s(self, test: NcclJob) -> float:
        single = test.phase == "single"
        return self.prof.single_node_timeout_s if single else self.prof.job_timeout_s

    async def execute(self, test: NcclJob, spawn: Spawner) -> Execution:
        first = self.addresses[test.nodes[0]].address
        env = job_env(self.prof, self.extra_env, f"{first}:{self.prof.bootstrap_port}", test)
        timeout = self.timeout_s(test)
        where = await self.transport.placement(test.nodes)
        if self.prof.launcher == "srun":
            if where.outside:
                why = f"srun cannot start ranks outside the run's allocation: {where.outside_why}"
                return Execution((), why)
            names = [self.slurm_names[n] for n in test.nodes]
            return await run_srun(
                self.prof, test.nodes, env, timeout, spawn, names, where.job, test
            )
        if where.job is not None:
            hosts = [where.names[n] for n in test.nodes]
            script = mpirun_script(self.prof, hosts, env, "allocation", test)
        else:
            hosts = [self.addresses[n].address for n in test.nodes]
            script = mpirun_script(self.prof, hosts, env, "step" if where.in_step else "ssh", test)
        return await run_mpirun(test.nodes, script, timeout, spawn)

    def sanity(self, test: NcclJob, run: Execution) -> Sanity:
        ranks = len(test.nodes) * self.prof.ranks_per_node
        # the launcher names a node by its address, or by its Slurm name inside an allocation
        hosts = {self.slurm_names[n]: n for n in test.nodes}
        hosts.update({self.addresses[n].address: n for n in test.nodes})
        reading = read_job(
            run, self.message_bytes(test), ranks, self.timeout_s(test), test.nodes, hosts,
            test.collective,
        )  # fmt: skip
        self.readings[test] = reading
        return Sanity(reading.busbw, reading.error or reading.corrupt)

    def passes(self, test: NcclJob, value: float | None) -> bool:
        if test.phase == "matrix":  # one size: no sweep average to judge
            return self.floor_of(test).holds(value)
        floors = self.prof.floors(len(test.nodes))
        avg = self.readings[test].avg_busbw if test in self.readings else None
        return floors.busbw.holds(value) and floors.avg_busbw.holds(avg)

    def localization_doc(self) -> dict[str, Any]:
        loc = self.localizer.loc
        group = loc.smallest_failing()
        whole = loc.whole()
        return {
            "whole_set": None
            if whole is None
            else {
                "nodes": str(NodeSet.fromlist(list(whole.test.nodes))),
                "passed": whole.passed,
                "busbw": whole.value,
                "error": whole.error,
            },
            "rounds_used": self.localizer.rounds_used(),
            "named": sorted(loc.blamed()),
            "not_confirmed": loc.suspects(),
            "fault_needs_group": None if group is None else str(NodeSet.fromlist(list(group))),
            "leaf_pair": None if (pair := loc.slow_pair()) is None else list(pair),
            "leaf_pairs_left": None
            if (c := loc.pair_candidates()) is None or pair is not None
            else sorted(list(p) for p in c),
            "lost": dict(sorted(loc.down.items())),
            **self.curve_doc(),
            "status": {n: loc.status(n) for n in self.nodes},
        }

    def curve_doc(self) -> dict[str, Any]:
        """The matrix's curve for report.html and replay: per collective, its points in scale
        order (nodes per group, worst and best group's busbw, floor, efficiency)."""
        m = self.prof.matrix
        if m is None or not self.localizer.loc.of_phase("matrix"):
            return {}
        points = curve(m, matrix_results(self.localizer.loc, self.readings))
        return {
            "curve": {
                "unit": "GB/s",
                "line_rate": m.line_rate,
                "collectives": {
                    c: [
                        {"scale": p.scale, "nodes": p.nodes, "worst": p.worst, "best": p.best,
                         "floor": p.floor, "efficiency": p.efficiency}
                        for p in pts
                    ]
                    for c, pts in points.items()
                },
            }
        }  # fmt: skip

    def verdicts(self, evidence: EvidenceRefs[NcclJob]) -> list[Verdict]:
        judge = Judge(self.localizer.loc, self.prof, self.readings, evidence.refs, self.cabling,
                      self.uplinks)  # fmt: skip
        return [v for n in self.nodes for v in judge.verdicts(n)]
