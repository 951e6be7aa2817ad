"""`--act kubernetes`: the label and taint each node gets, as JSON patches of its Node.

A rejected node: label `nodegate.io/admitted=false`, a `NoSchedule` taint
`nodegate.io/rejected=<check>_<class>` and the reason in annotation `nodegate.io/reason`; an
admitted one: `nodegate.io/admitted=true`, nodegate's taint and annotation removed. Other
taints, labels and annotations are never touched.

A Node's `spec.taints` has no merge key: a strategic-merge or merge patch replaces the list
whole (`"taints": []` applied by hand wipes every taint). So the change is a JSON patch
(RFC 6902) computed against the node as read: it adds, replaces or removes exactly the entry
keyed `nodegate.io/rejected` (each by index, after a `test` of that index's key), and starts
with a `test` of the node's resourceVersion, so that a node changed since it was read fails
the patch instead of losing the change. Dry-run writes `<run-dir>/kubernetes-patches.json`
for review: per node the labels, annotation and taint wanted, the JSON patch (when the node
was read: `--kubeconfig` given) and the same change as `kubectl` commands, which touch only
nodegate's keys. `--apply --kubeconfig FILE` reads each node and patches it with the
official client (`CoreV1Api.patch_node`, `application/json-patch+json`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from nodegate.actions.base import (
    ActionRecord,
    intent,
    main_reason,
    not_actionable,
    reason_text,
    record,
    refusal,
    refuse,
    summary,
    target_name,
)
from nodegate.core.results import PATCHES_FILE

K8S_NAME_LABEL = "k8s_node"  # inventory label: the node's Kubernetes name (docs/inventory.md)
ADMITTED_LABEL = "nodegate.io/admitted"
RUN_LABEL = "nodegate.io/run"
CLASS_LABEL = "nodegate.io/remediation"
REASON_ANNOTATION = "nodegate.io/reason"
TAINT_KEY = "nodegate.io/rejected"
JSON_PATCH = "application/json-patch+json"
ANNOTATION_MAX = 1024  # a reason, not a report: the admission.json has the whole story
_LABEL_VALUE_MAX = 63  # Kubernetes label values (and taint values): 63 characters
_NOT_LABEL = re.compile(r"[^A-Za-z0-9_.-]+")
_OUT_EFFECTS = ("NoSchedule", "NoExecute")  # a taint that keeps work off the node


def label_value(text: str) -> str:
    """`text` as a valid label value: [A-Za-z0-9_.-], starts and ends alphanumeric, <= 63."""
    v = _NOT_LABEL.sub("-", text)[:_LABEL_VALUE_MAX]
    return v.strip("-_.")


@dataclass(frozen=True)
class Want:
    """What nodegate's keys of one Node should be (a None value: the key removed)."""

    labels: dict[str, str | None]
    annotations: dict[str, str | None]
    taint: dict[str, str] | None  # None: nodegate's taint removed

    def to_json(self) -> dict[str, Any]:
        return {"labels": self.labels, "annotations": self.annotations, "taint": self.taint}


@dataclass(frozen=True)
class NodeView:
    """A Node as read: its labels, annotations, taints (None: the field is absent) and
    resourceVersion."""

    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: list[dict[str, Any]] | None = None
    resource_version: str | None = None
    unschedulable: bool = False

    def ours(self) -> list[int]:
        """Indexes of nodegate's taint in `taints`."""
        return [i for i, t in enumerate(self.taints or ()) if t.get("key") == TAINT_KEY]

    def held_by(self) -> str | None:
        """What, not nodegate's, keeps work off this node: a cordon or another's taints."""
        why = ["cordoned (spec.unschedulable)"] if self.unschedulable else []
        why += [
            f"taint {t.get('key')}={t.get('value') or ''}:{t.get('effect')}"
            for t in self.taints or ()
            if t.get("key") != TAINT_KEY and t.get("effect") in _OUT_EFFECTS
        ]
        return ", ".join(why) or None

    def to_json(self) -> dict[str, Any]:
        return {"labels": dict(self.labels), "taints": list(self.taints or [])}


def want_of(doc: Mapping[str, Any], node: str) -> Want | None:
    """nodegate's keys for one node of an actionable decision; None to leave it alone."""
    what = intent(doc, node)
    if what == "leave":
        return None
    run = label_value(doc["run_id"])
    if what == "return":
        return Want(
            {ADMITTED_LABEL: "true", RUN_LABEL: run, CLASS_LABEL: None},
            {REASON_ANNOTATION: None},
            None,
        )
    reasons = doc["nodes"][node]["reasons"]
    main = main_reason(reasons) or {}
    cls = str(main.get("remediation_class") or "retest")
    value = label_value(f"{main.get('check', 'rejected')}_{main.get('remediation_class')}")
    return Want(
        {ADMITTED_LABEL: "false", RUN_LABEL: run, CLASS_LABEL: label_value(cls)},
        {REASON_ANNOTATION: reason_text(doc["run_id"], reasons, ANNOTATION_MAX)},
        {"key": TAINT_KEY, "value": value, "effect": "NoSchedule"},
    )


def _pointer(*parts: str) -> str:
    """An RFC 6901 JSON pointer: `~` and `/` inside a key escaped."""
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


def _map_ops(
    where: tuple[str, str], have: Mapping[str, str], want: Mapping[str, str | None]
) -> list[dict[str, Any]]:
    """Set or remove exactly the keys of `want` in a labels/annotations map."""
    if not have:  # the map may be absent: add it whole, with nodegate's keys only
        keep = {k: v for k, v in want.items() if v is not None}
        return [{"op": "add", "path": _pointer(*where), "value": keep}] if keep else []
    ops: list[dict[str, Any]] = []
    for key, value in want.items():
        if value is None and key in have:
            ops.append({"op": "remove", "path": _pointer(*where, key)})
        elif value is not None and have.get(key) != value:
            ops.append({"op": "add", "path": _pointer(*where, key), "value": value})
    return ops


def _taint_ops(view: NodeView, taint: dict[str, str] | None) -> list[dict[str, Any]]:
    """Add, replace or remove exactly nodegate's taint; every other entry stays."""
    ours = view.ours()
    ops: list[dict[str, Any]] = []
    keep = ours[:1] if taint is not None else []
    for i in reversed([i for i in ours if i not in keep]):  # from the end: indexes hold
        path = _pointer("spec", "taints", str(i))
        ops += [{"op": "test", "path": path + "/key", "value": TAINT_KEY},
                {"op": "remove", "path": path}]  # fmt: skip
    if taint is None:
        return ops
    if keep:
        t = (view.taints or [])[keep[0]]
        if {k: t.get(k) for k in taint} != taint:
            path = _pointer("spec", "taints", str(keep[0]))
            ops += [{"op": "test", "path": path + "/key", "value": TAINT_KEY},
                    {"op": "replace", "path": path, "value": taint}]  # fmt: skip
    elif view.taints is None:
        ops.append({"op": "add", "path": "/spec/taints", "value": [taint]})
    else:
        ops.append({"op": "add", "path": "/spec/taints/-", "value": taint})
    return ops


def json_patch(want: Want, view: NodeView) -> list[dict[str, Any]]:
    """The JSON patch that brings `view` to `want`; [] when it is there already."""
    ops = _map_ops(("metadata", "labels"), view.labels, want.labels)
    ops += _map_ops(("metadata", "annotations"), view.annotations, want.annotations)
    ops += _taint_ops(view, want.taint)
    if ops and view.resource_version is not None:
        test = {"op": "test", "path": "/metadata/resourceVersion", "value": view.resource_version}
        ops.insert(0, test)
    return ops


def kubectl(name: str, want: Want) -> list[list[str]]:
    """The same change by hand (argument lists): kubectl's taint, label and annotate touch
    only the keys they name."""

    def pairs(m: Mapping[str, str | None]) -> list[str]:
        return [f"{k}-" if v is None else f"{k}={v}" for k, v in m.items()]

    t = want.taint
    taint = f"{t['key']}={t['value']}:{t['effect']}" if t is not None else f"{TAINT_KEY}-"
    return [
        ["kubectl", "label", "node", name, "--overwrite", *pairs(want.labels)],
        ["kubectl", "annotate", "node", name, "--overwrite", *pairs(want.annotations)],
        ["kubectl", "taint", "node", name, taint, *(["--overwrite"] if t is not None else [])],
    ]


def view_of(k8s_node: Any) -> NodeView:
    """A V1Node as read by the official client."""
    meta = getattr(k8s_node, "metadata", None)
    spec = getattr(k8s_node, "spec", None)
    raw = getattr(spec, "taints", None)
    taints = None
    if raw is not None:
        taints = []
        for t in raw:
            d = {"key": t.key, "value": t.value, "effect": t.effect}
            added = getattr(t, "time_added", None)
            if added is not None:
                d["timeAdded"] = added.isoformat() if hasattr(added, "isoformat") else str(added)
            taints.append({k: v for k, v in d.items() if v is not None})
    return NodeView(
        dict(getattr(meta, "labels", None) or {}),
        dict(getattr(meta, "annotations", None) or {}),
        taints,
        getattr(meta, "resource_version", None),
        bool(getattr(spec, "unschedulable", False)),
    )


class KubernetesAction:
    """`pytest_nodegate_admission` implementation for `--act kubernetes`."""

    def __init__(self, apply: bool, kubeconfig: Path | None, failures: list[str]) -> None:
        self.apply = apply
        self.kubeconfig = kubeconfig  # dry-run with one: the nodes are read, never written
        self.failures = failures
        self.lines: list[str] = []

    @pytest.hookimpl
    def pytest_nodegate_admission(self, doc: dict[str, Any], run_dir: Path) -> None:
        skipped = not_actionable(doc)
        if skipped is not None:
            record(run_dir, doc, "kubernetes", self.apply, [], skipped=skipped)
            self.lines = [f"kubernetes: {skipped}"]
            return
        api = None
        if self.kubeconfig is not None:
            try:
                api = self._api()
            except Exception as exc:  # noqa: BLE001 - any client/config failure is reported
                why = f"kubeconfig {self.kubeconfig}: {type(exc).__name__}: {exc}"
                record(run_dir, doc, "kubernetes", self.apply, [], error=why)
                self.failures.append(f"kubernetes: {why}")
                self.lines = [f"kubernetes: FAILED: {why}"]
                return
        planned = [self._plan(doc, n, api) for n in doc["nodes"]]
        recs = [r for r, _ in planned]
        # The blast-radius guard counts the nodes this run would newly taint.
        take_out = [r for r, w in planned if w is not None and w.taint is not None
                    and r.result != "failed" and not _tainted(r)]  # fmt: skip
        refused = refusal("kubernetes", "taint", doc, take_out)
        if refused is not None:
            refuse(take_out, refused)
            self.failures.append(refused["message"])
        if self.apply:
            assert api is not None  # settings: --apply needs --kubeconfig
            for r in recs:
                if r.action == "patch" and r.result == "planned":
                    self._apply(api, r)
        else:
            patches = {r.node: {"kubernetes_node": r.target, **w.to_json(), "patch": r.patch,
                                "kubectl": kubectl(r.target, w)}
                       for r, w in planned if w is not None and r.action == "patch"}  # fmt: skip
            (run_dir / PATCHES_FILE).write_text(json.dumps(patches, indent=1) + "\n")
        record(run_dir, doc, "kubernetes", self.apply, recs, refused=refused)
        self.failures += [f"kubernetes {r.node}: {r.error}" for r in recs if r.result == "failed"]
        self.lines = summary("kubernetes", self.apply, recs)
        if refused is not None:
            self.lines.append(refused["message"])

    def _plan(
        self, doc: Mapping[str, Any], node: str, api: Any
    ) -> tuple[ActionRecord, Want | None]:
        d = doc["nodes"][node]
        name = target_name(doc, node, K8S_NAME_LABEL)
        want = want_of(doc, node)
        rec = ActionRecord(node, name, d["state"], "none", f"{d['state']}: no action")
        if want is None:
            rec.result = "unchanged"
            return rec, None
        rec.why = "rejected: taint" if want.taint is not None else "admitted: untaint"
        rec.reason = want.annotations[REASON_ANNOTATION]
        view = None
        if api is not None:
            try:
                view = view_of(api.read_node(name))
            except Exception as exc:  # noqa: BLE001 - an API error is this node's result
                rec.result, rec.error = "failed", f"{type(exc).__name__}: {str(exc)[:300]}"
                return rec, want
            rec.before = view.to_json()
            if want.taint is None:
                rec.held_by = view.held_by()
            patch = json_patch(want, view)
            if not patch:
                rec.result, rec.why = "unchanged", rec.why + " (as wanted already)"
                return rec, want
            rec.patch = patch
        rec.action = "patch"
        return rec, want

    def _api(self) -> Any:
        from kubernetes import client, config  # the optional extra nodegate[kubernetes]

        config.load_kube_config(config_file=str(self.kubeconfig))  # type: ignore[no-untyped-call]
        return client.CoreV1Api()

    def _apply(self, api: Any, r: ActionRecord) -> None:
        try:
            after = api.patch_node(r.target, r.patch, _content_type=JSON_PATCH)
            r.after = view_of(after).to_json()
            r.result = "applied"
        except Exception as exc:  # noqa: BLE001 - an API error is this node's result
            r.result, r.error = "failed", f"{type(exc).__name__}: {str(exc)[:300]}"

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.lines:
            terminalreporter.section("nodegate actions")
            for line in self.lines:
                terminalreporter.write_line(line)


def _tainted(r: ActionRecord) -> bool:
    """The node was read and carries nodegate's taint already (a new cause is no new node)."""
    taints = (r.before or {}).get("taints") or ()
    return any(t.get("key") == TAINT_KEY for t in taints)
