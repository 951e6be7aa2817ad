"""`--act kubernetes`: the label and taint each node gets, as Node patch documents.

A rejected node: label `nodegate.io/admitted=false`, a `NoSchedule` taint
`nodegate.io/rejected=<check>_<class>` and the reason in annotation `nodegate.io/reason`; an
admitted one: `nodegate.io/admitted=true`, nodegate's taint and annotation removed. Other
taints and labels are never touched. Dry-run writes the documents to
`<run-dir>/kubernetes-patches.json` for review; `--apply --kubeconfig FILE` reads each node
and patches it with the official client (`CoreV1Api.patch_node`).

A Node's `spec.taints` is replaced whole by a patch (it has no merge key), so the applied
patch carries the node's other taints as read just before; the dry-run file shows only
nodegate's taint (`other_taints: "kept"`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
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
ANNOTATION_MAX = 1024  # a reason, not a report: the admission.json has the whole story
_LABEL_VALUE_MAX = 63  # Kubernetes label values (and taint values): 63 characters
_NOT_LABEL = re.compile(r"[^A-Za-z0-9_.-]+")


def label_value(text: str) -> str:
    """`text` as a valid label value: [A-Za-z0-9_.-], starts and ends alphanumeric, <= 63."""
    v = _NOT_LABEL.sub("-", text)[:_LABEL_VALUE_MAX]
    return v.strip("-_.")


def node_patch(
    doc: Mapping[str, Any], node: str, other_taints: list[dict[str, Any]] | None
) -> dict[str, Any] | None:
    """The patch for one node of an actionable decision; None to leave it alone.

    `other_taints`: the node's taints other than nodegate's (None in dry-run: not read).
    """
    want = intent(doc, node)
    if want == "leave":
        return None
    d = doc["nodes"][node]
    keep = list(other_taints or [])
    if want == "take_out":
        main = main_reason(d["reasons"]) or {}
        value = label_value(f"{main.get('check', 'rejected')}_{main.get('remediation_class')}")
        taint = {"key": TAINT_KEY, "value": value, "effect": "NoSchedule"}
        labels = {
            ADMITTED_LABEL: "false",
            RUN_LABEL: label_value(doc["run_id"]),
            CLASS_LABEL: label_value(str(main.get("remediation_class") or "retest")),
        }
        reason = reason_text(doc["run_id"], d["reasons"], ANNOTATION_MAX)
        meta = {"labels": labels, "annotations": {REASON_ANNOTATION: reason}}
        return {"metadata": meta, "spec": {"taints": [*keep, taint]}}
    labels2: dict[str, str | None] = {
        ADMITTED_LABEL: "true",
        RUN_LABEL: label_value(doc["run_id"]),
        CLASS_LABEL: None,  # null removes the key
    }
    meta2 = {"labels": labels2, "annotations": {REASON_ANNOTATION: None}}
    return {"metadata": meta2, "spec": {"taints": keep}}


def _taints_of(k8s_node: Any) -> list[dict[str, Any]]:
    """A V1Node's taints as dicts (key, value, effect, timeAdded when set)."""
    out = []
    for t in getattr(getattr(k8s_node, "spec", None), "taints", None) or []:
        d = {"key": t.key, "value": t.value, "effect": t.effect}
        added = getattr(t, "time_added", None)
        if added is not None:
            d["timeAdded"] = added.isoformat() if hasattr(added, "isoformat") else str(added)
        out.append({k: v for k, v in d.items() if v is not None})
    return out


def _labels_of(k8s_node: Any) -> dict[str, str]:
    return dict(getattr(getattr(k8s_node, "metadata", None), "labels", None) or {})


def _already(patch: dict[str, Any], taints: list[dict[str, Any]], labels: dict[str, str]) -> bool:
    """Whether the node already has what the patch sets (nodegate's taint and labels)."""
    ours = [t for t in taints if t.get("key") == TAINT_KEY]
    want = [t for t in patch["spec"]["taints"] if t.get("key") == TAINT_KEY]
    strip = [{k: t.get(k) for k in ("key", "value", "effect")} for t in ours]
    same_labels = all(labels.get(k) == v for k, v in patch["metadata"]["labels"].items())
    return strip == want and same_labels


class KubernetesAction:
    """`pytest_nodegate_admission` implementation for `--act kubernetes`."""

    def __init__(self, apply: bool, kubeconfig: Path | None, failures: list[str]) -> None:
        self.apply = apply
        self.kubeconfig = kubeconfig
        self.failures = failures
        self.lines: list[str] = []

    @pytest.hookimpl
    def pytest_nodegate_admission(self, doc: dict[str, Any], run_dir: Path) -> None:
        skipped = not_actionable(doc)
        if skipped is not None:
            record(run_dir, doc, "kubernetes", self.apply, [], skipped=skipped)
            self.lines = [f"kubernetes: {skipped}"]
            return
        recs = [self._plan(doc, n) for n in doc["nodes"]]
        if self.apply:
            try:
                api = self._api()
            except Exception as exc:  # noqa: BLE001 - any client/config failure is reported
                why = f"kubeconfig {self.kubeconfig}: {type(exc).__name__}: {exc}"
                record(run_dir, doc, "kubernetes", True, recs, error=why)
                self.failures.append(f"kubernetes: {why}")
                self.lines = [f"kubernetes: FAILED: {why}"]
                return
            for r in recs:
                if r.action == "patch":
                    self._apply(api, doc, r)
        else:
            patches = {r.node: {"kubernetes_node": r.target, "patch": r.patch,
                                "other_taints": "kept"} for r in recs if r.patch}  # fmt: skip
            (run_dir / PATCHES_FILE).write_text(json.dumps(patches, indent=1) + "\n")
        record(run_dir, doc, "kubernetes", self.apply, recs)
        self.failures += [f"kubernetes {r.node}: {r.error}" for r in recs if r.result == "failed"]
        self.lines = summary("kubernetes", self.apply, recs)

    def _plan(self, doc: Mapping[str, Any], node: str) -> ActionRecord:
        d = doc["nodes"][node]
        name = target_name(doc, node, K8S_NAME_LABEL)
        patch = node_patch(doc, node, None)
        rec = ActionRecord(node, name, d["state"], "none", f"{d['state']}: no action")
        if patch is None:
            rec.result = "unchanged"
            return rec
        rec.action, rec.patch = "patch", patch
        rec.why = "rejected: taint" if d["state"] == "rejected" else "admitted: untaint"
        rec.reason = patch["metadata"]["annotations"][REASON_ANNOTATION]
        return rec

    def _api(self) -> Any:
        from kubernetes import client, config  # the optional extra nodegate[kubernetes]

        config.load_kube_config(config_file=str(self.kubeconfig))  # type: ignore[no-untyped-call]
        return client.CoreV1Api()

    def _apply(self, api: Any, doc: Mapping[str, Any], r: ActionRecord) -> None:
        try:
            current = api.read_node(r.target)
            taints, labels = _taints_of(current), _labels_of(current)
            r.before = {"labels": labels, "taints": taints}
            others = [t for t in taints if t.get("key") != TAINT_KEY]
            patch = node_patch(doc, r.node, others)
            assert patch is not None
            r.patch = patch
            if _already(patch, taints, labels):
                r.result = "unchanged"
                return
            after = api.patch_node(r.target, patch)
            r.after = {"labels": _labels_of(after), "taints": _taints_of(after)}
            r.result = "applied"
        except Exception as exc:  # noqa: BLE001 - an API error is this node's result
            r.result, r.error = "failed", f"{type(exc).__name__}: {str(exc)[:300]}"

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.lines:
            terminalreporter.section("nodegate actions")
            for line in self.lines:
                terminalreporter.write_line(line)
