"""Stage `ib_pairs`: ib_write_bw per rail between planned node pairs, then localization.

Only nodes that passed every earlier stage take part (the engine's rule for active stages).
Rails come from the profile's `hca.rails`; method, floor, ports and deadlines from `ib_pairs`.
The plan is written to <run>/ib_pairs/plan.json before each round runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from nodegate.ibpairs.plan import (
    Localization,
    PairResult,
    Round,
    next_round,
    round_one,
    rounds_used,
    suspect_paths,
)
from nodegate.ibpairs.run import Method, Rail, TestRun, run_round
from nodegate.inventory import Node
from nodegate.model import CommandSpec, Reach, Status, Verdict
from nodegate.stages.base import CheckSpec, Stage, StageContext

STRAY = "pgrep -af '[i]b_write_bw' || true"


class IbPairsStage(Stage):
    name = "ib_pairs"
    active = True
    checks = (
        CheckSpec(
            "ib_pairs.rail.bandwidth",
            "test_rail_bandwidth",
            "ib_write_bw per rail against a partner reaches the floor (bad node localized)",
        ),
        CheckSpec(
            "ib_pairs.cleanup", "test_no_stray_perftest", "no ib_write_bw left after the stage"
        ),
    )

    async def run(self, ctx: StageContext) -> list[Verdict]:
        verdicts: list[Verdict] = []
        groups: dict[str, list[Node]] = {}
        for n in ctx.nodes:
            prof = ctx.profiles[n.name]
            why = _missing(prof.data)
            if why:
                verdicts += self._all(n.name, Status.ERROR, f"profile {prof.name}: {why}")
                continue
            groups.setdefault(prof.name, []).append(n)
        for name, members in groups.items():
            if len(members) < 2:
                verdicts += self._all(
                    members[0].name, Status.ERROR, f"no partner node of profile {name} to test with"
                )
                continue
            verdicts += await self._group(ctx, members)
        return verdicts

    def _all(self, node: str, status: Status, message: str) -> list[Verdict]:
        return [Verdict(c.id, node, status, "ib_pairs", message=message) for c in self.checks]

    async def _group(self, ctx: StageContext, members: Sequence[Node]) -> list[Verdict]:
        prof = ctx.profiles[members[0].name]
        sec = prof.section("ib_pairs")
        method = Method.from_profile(sec)
        rails = {r.rail: r for r in _rails(prof.section("hca"))}
        names = [n.name for n in members]
        leaf = {n.name: n.labels.get("leaf", "") for n in members}
        loc = Localization(tuple(sorted(rails)), tuple(names), leaf)
        address = {n: ctx.transport.address(n) for n in names}
        out_dir = ctx.run_dir / "ib_pairs"
        out_dir.mkdir(parents=True, exist_ok=True)
        runs: list[TestRun] = []
        plan_log: list[dict[str, Any]] = []
        limit = ctx.options.fanout
        rounds: list[Round] = round_one(
            names, leaf, sorted(rails), same_leaf=sec["pairing"] == "same_leaf", seed=sec["seed"]
        )
        while rounds:
            rnd = rounds.pop(0)
            plan_log.append(_round_doc(rnd))
            _write(
                out_dir / f"plan-{prof.name}.json",
                {"method": method.describe(), "rounds": plan_log},
            )
            log = ctx.options.log
            if log is not None:
                log(f"ib_pairs {prof.name}: round {rnd.label}: {len(rnd.tests)} tests")
            done = await run_round(
                ctx.transport,
                rnd.tests,
                rails,
                method,
                address,
                rnd.label,
                limit=limit,
                rails_concurrent=bool(sec["rails_concurrent"]),
            )
            for r in done:
                loc.add(r.result)
            runs += done
            _write_evidence(ctx.run_dir, runs)
            if not rounds:
                nxt = next_round(loc)
                if nxt is not None:
                    rounds.append(nxt)
        paths = suspect_paths(loc)
        _write(
            out_dir / f"localization-{prof.name}.json",
            {
                "rounds_used": rounds_used(loc.results),
                "suspect_paths": [{"leaves": [a, b], "rail": r} for a, b, r in paths],
                "status": {n: {str(r): loc.status(n, r) for r in sorted(rails)} for n in names},
            },
        )
        verdicts = [
            self._rail_verdict(n, rails[r], loc, method, paths)
            for n in names
            for r in sorted(rails)
        ]
        verdicts += await self._cleanup(ctx, names)
        return verdicts

    def _rail_verdict(
        self, node: str, rail: Rail, loc: Localization, m: Method, paths: list[tuple[str, str, int]]
    ) -> Verdict:
        comp = f"{rail.device} port 1 (rail {rail.rail})"
        status = loc.status(node, rail.rail)
        rs = loc.of(node, rail.rail)
        ev = tuple(f"raw/{node}/ib_pairs.json#{_tid(r)}" for r in rs)
        bw = max((r.bandwidth_gbps for r in rs if r.passed and r.bandwidth_gbps), default=None)
        history = "; ".join(_describe(node, r) for r in rs)
        want = f">= {m.floor_gbps:g}"
        if status in ("pass", "cleared"):
            note = ""
            if status == "cleared":
                mine = {(loc.leaf.get(node), rail.rail)}
                hit = [p for p in paths if (p[0], p[2]) in mine or (p[1], p[2]) in mine]
                note = " (cleared with a good partner"
                note += f"; path {hit[0][0]}<->{hit[0][1]} suspect)" if hit else ")"
            return Verdict(
                "ib_pairs.rail.bandwidth",
                node,
                Status.PASS,
                comp,
                bw,
                want,
                "Gb/s",
                f"{history}{note} [{m.describe()}]",
                evidence=ev,
            )
        errors = [r.error for r in rs if r.error and not r.passed]
        worst = min((r.bandwidth_gbps for r in rs if r.bandwidth_gbps is not None), default=None)
        if status == "blamed":
            msg = f"fails with two good partners: {history} [{m.describe()}]"
            hint = (
                f"check {rail.device}: cable/transceiver, port counters, firmware; swap or reseat"
            )
        elif status == "untested":
            return Verdict(
                "ib_pairs.rail.bandwidth",
                node,
                Status.ERROR,
                comp,
                None,
                want,
                "Gb/s",
                "not tested (no partner in any round)",
                evidence=ev,
            )
        else:
            msg = f"failed and not cleared (no good partner left within 3 rounds): {history}"
            hint = "retest with more healthy nodes on this rail"
        status_out = Status.ERROR if errors and worst is None else Status.FAIL
        return Verdict(
            "ib_pairs.rail.bandwidth", node, status_out, comp, worst, want, "Gb/s", msg, hint, ev
        )

    async def _cleanup(self, ctx: StageContext, names: Sequence[str]) -> list[Verdict]:
        plan = {n: [CommandSpec("stray", STRAY, 15.0)] for n in names}
        outs = await ctx.transport.run_stage("ib_pairs-cleanup", plan)
        verdicts = []
        for n in names:
            o = outs[n]
            r = o.result("stray")
            ev = (r.evidence,) if r is not None and r.evidence else ()
            if o.reach is not Reach.OK or r is None or r.rc != 0:
                verdicts.append(
                    Verdict(
                        "ib_pairs.cleanup",
                        n,
                        Status.ERROR,
                        "ib_write_bw",
                        None,
                        "none",
                        message=f"could not check: {o.detail}",
                        evidence=ev,
                    )
                )
            elif r.stdout.strip():
                left = r.stdout.strip().splitlines()
                verdicts.append(
                    Verdict(
                        "ib_pairs.cleanup",
                        n,
                        Status.FAIL,
                        "ib_write_bw",
                        len(left),
                        0,
                        message="still running: " + "; ".join(left),
                        remediation="kill the listed processes",
                        evidence=ev,
                    )
                )
            else:
                verdicts.append(
                    Verdict(
                        "ib_pairs.cleanup",
                        n,
                        Status.PASS,
                        "ib_write_bw",
                        0,
                        0,
                        message="no ib_write_bw left",
                        evidence=ev,
                    )
                )
        return verdicts


def _missing(data: Mapping[str, Any]) -> str | None:
    if not isinstance(data.get("ib_pairs"), Mapping):
        return "no 'ib_pairs' section"
    hca = data.get("hca")
    if not isinstance(hca, Mapping) or not hca.get("rails"):
        return "no 'hca.rails' (the rails ib_pairs tests)"
    return None


def _rails(hca: Mapping[str, Any]) -> list[Rail]:
    out = []
    for r in hca["rails"]:
        gpu = str(r.get("gpu", ""))
        out.append(
            Rail(
                int(r["rail"]),
                str(r["device"]),
                int(gpu[3:]) if gpu[3:].isdigit() else None,
                r.get("numa_node"),
            )
        )
    return out


def _tid(r: PairResult) -> str:
    return f"r{r.round_label}-rail{r.test.rail}-{r.test.server}-to-{r.test.client}"


def _describe(node: str, r: PairResult) -> str:
    partner = r.test.other(node)
    what = f"{r.bandwidth_gbps:g} Gb/s" if r.bandwidth_gbps is not None else "no result"
    if r.error:
        what += f" ({r.error})"
    return f"round {r.round_label} with {partner}: {what}"


def _round_doc(rnd: Round) -> dict[str, Any]:
    return {
        "round": rnd.label,
        "tests": [{"rail": t.rail, "server": t.server, "client": t.client} for t in rnd.tests],
    }


def _write(path: Path, doc: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


def _write_evidence(run_dir: Path, runs: Sequence[TestRun]) -> None:
    """raw/<node>/ib_pairs.json: every test the node took part in, both sides' raw output."""
    per_node: dict[str, dict[str, Any]] = {}
    for tr in runs:
        t = tr.result.test
        doc = {
            "round": tr.result.round_label,
            "rail": t.rail,
            "server": t.server,
            "client": t.client,
            "passed": tr.result.passed,
            "bandwidth_gbps": tr.result.bandwidth_gbps,
            "error": tr.result.error,
            "server_cmd": tr.server_cmd,
            "client_cmd": tr.client_cmd,
            "server_result": _proc(tr.server),
            "client_result": _proc(tr.client),
        }
        for n in t.nodes():
            per_node.setdefault(n, {"commands": {}})["commands"][_tid(tr.result)] = doc
    for n, doc in per_node.items():
        d = run_dir / "raw" / n
        d.mkdir(parents=True, exist_ok=True)
        _write(d / "ib_pairs.json", {"bundle_version": 2, "node": n, "stage": "ib_pairs", **doc})


def _proc(p: Any) -> dict[str, Any] | None:
    if p is None:
        return None
    return {
        "rc": p.rc,
        "timed_out": p.timed_out,
        "killed": p.killed,
        "stdout": p.stdout,
        "stderr": p.stderr,
    }


STAGE = IbPairsStage()
