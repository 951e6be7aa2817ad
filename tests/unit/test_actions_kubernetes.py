"""--act kubernetes (#13 item 5, #21 item 5): the JSON patches touch only nodegate's taint,
labels and annotation, computed against the node as read (applied here by an RFC 6902
applier to Node documents: every other taint survives, the node had ours or not); the
dry-run file; the apply path with the official client's API object mocked at its boundary
(no cluster here); the blast-radius guard; an admitted node another keeps out, named."""

from __future__ import annotations

import copy
import json
import types
from pathlib import Path
from typing import Any

import pytest
from nodegate.actions.kubernetes import (
    JSON_PATCH,
    PATCHES_FILE,
    KubernetesAction,
    NodeView,
    json_patch,
    kubectl,
    label_value,
    want_of,
)
from nodegate.core import schemas

RUN = "20261201-000000-ab12"
XID = {
    "check": "gpu.xid", "status": "fail", "component": "GPU2 0000:4c:00.0 serial 1650",
    "observed": "79", "expected": "no Xid", "unit": "Xid", "evidence": [],
    "message": "Xid 79 x1 (GPU has fallen off the bus: drain_rma)", "remediation": "RMA",
    "remediation_class": "rma",
}  # fmt: skip
REASON = f"nodegate {RUN}: gpu.xid GPU2 Xid 79 x1 (GPU has fallen off the bus: drain_rma) (rma)"
OURS = {"key": "nodegate.io/rejected", "value": "gpu.xid_rma", "effect": "NoSchedule"}
STALE = {"key": "nodegate.io/rejected", "value": "reach.ssh_reboot", "effect": "NoSchedule"}
GPU = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
MAINT = {"key": "maintenance", "value": "bios", "effect": "NoExecute",
         "timeAdded": "2026-12-01T10:00:00+00:00"}  # fmt: skip


def doc(actionable: bool = True, guard: dict[str, Any] | None = None) -> dict[str, Any]:
    nodes = {
        "gpu001": {"state": "admitted", "admitted": True, "reasons": [], "labels": {}},
        "gpu002": {"state": "rejected", "admitted": False, "reasons": [XID],
                   "labels": {"k8s_node": "gpu002.k8s.example"}},
        "gpu003": {"state": "not_qualified", "admitted": False, "labels": {},
                   "reasons": [{**XID, "status": "out_of_scope", "message": "x"}]},
    }  # fmt: skip
    return {"run_id": RUN, "actionable": actionable, "nodes": nodes, "out_of_scope": [],
            **({"guard": guard} if guard else {})}  # fmt: skip


# --- an RFC 6902 applier, to apply the patches to Node documents ----------------------------


def _parts(path: str) -> list[str]:
    return [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]


def apply_patch(node: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """`ops` applied to a copy of `node` (add, remove, replace, test); ValueError on a test
    that does not hold or a path that is not there, as an API server refuses the patch."""
    out = copy.deepcopy(node)
    for op in ops:
        *head, last = _parts(op["path"])
        parent: Any = out
        for p in head:
            parent = parent[int(p)] if isinstance(parent, list) else parent[p]
        if isinstance(parent, list):
            index = len(parent) if last == "-" else int(last)
            if op["op"] == "test" and parent[index] != op["value"]:
                raise ValueError(f"test failed: {op['path']}")
            if op["op"] == "add":
                parent.insert(index, op["value"])
            elif op["op"] == "remove":
                del parent[index]
            elif op["op"] == "replace":
                parent[index] = op["value"]
            continue
        if op["op"] == "test" and parent.get(last) != op["value"]:
            raise ValueError(f"test failed: {op['path']}")
        if op["op"] in ("add", "replace"):
            if op["op"] == "replace" and last not in parent:
                raise ValueError(f"no such path: {op['path']}")
            parent[last] = op["value"]
        elif op["op"] == "remove":
            del parent[last]
    return out


def node_doc(labels=None, taints=None, annotations=None, rv="41") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "n", "resourceVersion": rv}
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    spec = {} if taints is None else {"taints": taints}
    return {"metadata": meta, "spec": spec}


def view(d: dict[str, Any]) -> NodeView:
    m = d["metadata"]
    return NodeView(m.get("labels") or {}, m.get("annotations") or {}, d["spec"].get("taints"),
                    m.get("resourceVersion"), bool(d["spec"].get("unschedulable")))  # fmt: skip


def patched(node: str, d: dict[str, Any]) -> dict[str, Any]:
    want = want_of(doc(), node)
    assert want is not None
    return apply_patch(d, json_patch(want, view(d)))


REJECT_LABELS = {"nodegate.io/admitted": "false", "nodegate.io/run": RUN,
                 "nodegate.io/remediation": "rma"}  # fmt: skip


@pytest.mark.parametrize(
    ("taints", "after"),
    [
        (None, [OURS]),  # no taints at all
        ([], [OURS]),
        ([GPU, MAINT], [GPU, MAINT, OURS]),  # none of ours: added, the others stay
        ([GPU, STALE, MAINT], [GPU, OURS, MAINT]),  # another cause: ours replaced in place
        ([STALE, GPU, STALE], [OURS, GPU]),  # ours twice: one kept (replaced), one removed
    ],
)
def test_a_rejected_node_gets_only_our_taint(taints, after) -> None:
    before = node_doc({"kubernetes.io/hostname": "n"}, taints, {"site/owner": "ops"})
    got = patched("gpu002", before)
    assert got["spec"]["taints"] == after
    assert got["metadata"]["labels"] == {"kubernetes.io/hostname": "n", **REJECT_LABELS}
    assert got["metadata"]["annotations"] == {"site/owner": "ops", "nodegate.io/reason": REASON}


@pytest.mark.parametrize(
    ("taints", "after"),
    [
        (None, None),  # nothing of ours: the taints are not written at all (never `[]`)
        ([], []),
        ([GPU, MAINT], [GPU, MAINT]),
        ([GPU, STALE, MAINT], [GPU, MAINT]),
        ([STALE, GPU, OURS], [GPU]),
    ],
)
def test_an_admitted_node_loses_only_our_taint(taints, after) -> None:
    labels = {"kubernetes.io/hostname": "n", **REJECT_LABELS}
    before = node_doc(labels, taints, {"nodegate.io/reason": "old", "site/owner": "ops"})
    got = patched("gpu001", before)
    assert got["spec"].get("taints") == after
    assert got["metadata"]["labels"] == {
        "kubernetes.io/hostname": "n", "nodegate.io/admitted": "true", "nodegate.io/run": RUN,
    }  # fmt: skip
    assert got["metadata"]["annotations"] == {"site/owner": "ops"}


def test_the_patches_are_exact_and_guarded() -> None:
    want = want_of(doc(), "gpu001")
    assert want is not None
    d = node_doc({"a": "b"}, [GPU, STALE])
    assert json_patch(want, view(d)) == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "41"},
        {"op": "add", "path": "/metadata/labels/nodegate.io~1admitted", "value": "true"},
        {"op": "add", "path": "/metadata/labels/nodegate.io~1run", "value": RUN},
        {"op": "test", "path": "/spec/taints/1/key", "value": "nodegate.io/rejected"},
        {"op": "remove", "path": "/spec/taints/1"},
    ]
    # the node changed since it was read: the patch fails instead of removing another's taint
    moved = node_doc({"a": "b"}, [STALE, GPU], rv="42")
    with pytest.raises(ValueError, match="test failed: /metadata/resourceVersion"):
        apply_patch(moved, json_patch(want, view(d)))
    # already as wanted: no patch at all
    done = patched("gpu002", node_doc({}, [GPU]))
    reject = want_of(doc(), "gpu002")
    assert reject is not None and json_patch(reject, view(done)) == []
    assert want_of(doc(), "gpu003") is None  # not qualified: left alone


def test_label_values_are_valid() -> None:
    assert label_value("a b/c" + "x" * 80)[:6] == "a-b-cx"
    assert len(label_value("x" * 80)) == 63
    assert label_value("-run_") == "run"


def test_dry_run_writes_the_reviewable_change_and_the_plan(tmp_path: Path) -> None:
    failures: list[str] = []
    KubernetesAction(False, None, failures).pytest_nodegate_admission(doc(), tmp_path)
    patches = json.loads((tmp_path / PATCHES_FILE).read_text())
    admit = want_of(doc(), "gpu001")
    reject = want_of(doc(), "gpu002")
    assert admit is not None and reject is not None
    assert patches == {
        "gpu001": {"kubernetes_node": "gpu001", **admit.to_json(), "patch": None,
                   "kubectl": kubectl("gpu001", admit)},
        "gpu002": {"kubernetes_node": "gpu002.k8s.example", **reject.to_json(), "patch": None,
                   "kubectl": kubectl("gpu002.k8s.example", reject)},
    }  # fmt: skip
    assert patches["gpu002"]["taint"] == OURS
    assert patches["gpu001"]["taint"] is None
    assert patches["gpu002"]["kubectl"] == [
        ["kubectl", "label", "node", "gpu002.k8s.example", "--overwrite",
         "nodegate.io/admitted=false", f"nodegate.io/run={RUN}", "nodegate.io/remediation=rma"],
        ["kubectl", "annotate", "node", "gpu002.k8s.example", "--overwrite",
         f"nodegate.io/reason={REASON}"],
        ["kubectl", "taint", "node", "gpu002.k8s.example",
         "nodegate.io/rejected=gpu.xid_rma:NoSchedule", "--overwrite"],
    ]  # fmt: skip
    assert patches["gpu001"]["kubectl"][2] == [
        "kubectl", "taint", "node", "gpu001", "nodegate.io/rejected-"
    ]  # fmt: skip
    actions = json.loads((tmp_path / "actions.json").read_text())
    schemas.validate("actions", actions)
    k = actions["targets"]["kubernetes"]
    assert (k["mode"], k["skipped"], k["error"], k["refused"], failures) == (
        "dry-run", None, None, None, []
    )  # fmt: skip
    assert [(a["node"], a["target"], a["action"], a["result"]) for a in k["actions"]] == [
        ("gpu001", "gpu001", "patch", "planned"),
        ("gpu002", "gpu002.k8s.example", "patch", "planned"),
        ("gpu003", "gpu003", "none", "unchanged"),
    ]


def test_an_incomplete_run_is_not_acted_on(tmp_path: Path) -> None:
    KubernetesAction(False, None, []).pytest_nodegate_admission(doc(False), tmp_path)
    k = json.loads((tmp_path / "actions.json").read_text())["targets"]["kubernetes"]
    assert (k["actions"], k["skipped"]) == (
        [],
        "run not complete (required checks out of scope: 0): no action without --allow-incomplete",
    )
    assert not (tmp_path / PATCHES_FILE).exists()


def k8s_node(d: dict[str, Any]) -> Any:
    """A Node document as the official client's V1Node (the attributes nodegate reads)."""
    m, spec = d["metadata"], d["spec"]
    taints = spec.get("taints")
    ts = None if taints is None else [
        types.SimpleNamespace(key=t["key"], value=t.get("value"), effect=t["effect"],
                              time_added=t.get("timeAdded")) for t in taints
    ]  # fmt: skip
    return types.SimpleNamespace(
        metadata=types.SimpleNamespace(labels=m.get("labels"), annotations=m.get("annotations"),
                                       resource_version=m.get("resourceVersion")),
        spec=types.SimpleNamespace(taints=ts, unschedulable=spec.get("unschedulable")),
    )  # fmt: skip


class FakeCoreV1Api:
    """The boundary: kubernetes.client.CoreV1Api's read_node and patch_node, over Node
    documents the RFC 6902 applier changes."""

    nodes: dict[str, dict[str, Any]] = {}
    patched: list[tuple[str, list[dict[str, Any]], str]] = []

    def read_node(self, name: str) -> Any:
        if name not in self.nodes:
            raise RuntimeError(f"(404) Reason: Not Found: nodes {name!r} not found")
        return k8s_node(self.nodes[name])

    def patch_node(self, name: str, body: list[dict[str, Any]], _content_type: str) -> Any:
        self.patched.append((name, body, _content_type))
        self.nodes[name] = apply_patch(self.nodes[name], body)
        return k8s_node(self.nodes[name])


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> type[FakeCoreV1Api]:
    import kubernetes

    loaded: list[str] = []
    monkeypatch.setattr(
        kubernetes.config, "load_kube_config", lambda config_file: loaded.append(config_file)
    )
    monkeypatch.setattr(kubernetes.client, "CoreV1Api", FakeCoreV1Api)
    FakeCoreV1Api.patched = []
    FakeCoreV1Api.loaded = loaded  # type: ignore[attr-defined]
    return FakeCoreV1Api


def test_apply_patches_only_our_keys_and_names_a_node_another_keeps_out(
    tmp_path: Path, api: type[FakeCoreV1Api]
) -> None:
    cordoned = node_doc({"nodegate.io/admitted": "false"}, [MAINT, STALE])
    cordoned["spec"]["unschedulable"] = True
    api.nodes = {"gpu001": cordoned, "gpu002.k8s.example": node_doc({}, None)}
    failures: list[str] = []
    kubeconfig = tmp_path / "kubeconfig"
    act = KubernetesAction(True, kubeconfig, failures)
    act.pytest_nodegate_admission(doc(), tmp_path)
    assert api.loaded == [str(kubeconfig)]  # type: ignore[attr-defined]
    assert [(n, ct) for n, _, ct in api.patched] == [
        ("gpu001", JSON_PATCH), ("gpu002.k8s.example", JSON_PATCH)
    ]  # fmt: skip
    assert api.nodes["gpu001"]["spec"] == {"taints": [MAINT], "unschedulable": True}
    assert api.nodes["gpu002.k8s.example"]["spec"] == {"taints": [OURS]}
    k = json.loads((tmp_path / "actions.json").read_text())["targets"]["kubernetes"]
    schemas.validate("actions", {"schema_version": 1, "run_id": RUN, "targets": {"k": k}})
    assert [(a["node"], a["result"], a["error"]) for a in k["actions"]] == [
        ("gpu001", "applied", None), ("gpu002", "applied", None), ("gpu003", "unchanged", None)
    ]  # fmt: skip
    assert k["actions"][0]["after"]["taints"] == [MAINT]
    held = "cordoned (spec.unschedulable), taint maintenance=bios:NoExecute"
    assert k["actions"][0]["held_by"] == held
    assert act.lines == [
        "kubernetes (applied):",
        "  none unchanged: gpu003",
        "  patch applied: gpu[001-002]",
        f"  admitted, still out of service (not by nodegate): gpu001: {held}",
    ]
    assert failures == [] and not (tmp_path / PATCHES_FILE).exists()


def test_apply_is_idempotent_and_reports_a_missing_node(
    tmp_path: Path, api: type[FakeCoreV1Api]
) -> None:
    api.nodes = {"gpu002.k8s.example": patched("gpu002", node_doc({}, [GPU]))}
    failures: list[str] = []
    KubernetesAction(True, tmp_path / "kc", failures).pytest_nodegate_admission(doc(), tmp_path)
    assert api.patched == []
    k = json.loads((tmp_path / "actions.json").read_text())["targets"]["kubernetes"]
    assert [(a["node"], a["action"], a["result"]) for a in k["actions"]] == [
        ("gpu001", "none", "failed"), ("gpu002", "none", "unchanged"),
        ("gpu003", "none", "unchanged"),
    ]  # fmt: skip
    assert failures == [
        "kubernetes gpu001: RuntimeError: (404) Reason: Not Found: nodes 'gpu001' not found"
    ]


def test_past_max_drain_nothing_is_tainted(tmp_path: Path, api: type[FakeCoreV1Api]) -> None:
    d = doc(guard={"max_drain": 1, "rule": "1 node", "from": "--max-drain", "nodes": 4})
    d["nodes"]["gpu004"] = {**d["nodes"]["gpu002"], "labels": {}}
    api.nodes = {"gpu001": node_doc({}, [STALE]), "gpu002.k8s.example": node_doc({}, None),
                 "gpu004": node_doc({}, [GPU])}  # fmt: skip
    failures: list[str] = []
    KubernetesAction(True, tmp_path / "kc", failures).pytest_nodegate_admission(d, tmp_path)
    assert [n for n, _, _ in api.patched] == ["gpu001"]  # the admitted node is untainted
    assert api.nodes["gpu004"]["spec"] == {"taints": [GPU]}
    k = json.loads((tmp_path / "actions.json").read_text())["targets"]["kubernetes"]
    assert [(a["node"], a["action"], a["result"]) for a in k["actions"]] == [
        ("gpu001", "patch", "applied"), ("gpu002", "patch", "skipped"),
        ("gpu003", "none", "unchanged"), ("gpu004", "patch", "skipped"),
    ]  # fmt: skip
    assert failures == [
        "kubernetes: REFUSED to taint 2 nodes, more than max_drain 1 of 4 nodes (1 node; from "
        "--max-drain); top check gpu.xid on 2 of them; nothing tainted (a fleet-wide cause? else "
        "--max-drain)"
    ]
    assert k["refused"]["message"] == failures[0]


def test_a_dry_run_with_a_kubeconfig_reads_the_nodes_and_shows_the_exact_patch(
    tmp_path: Path, api: type[FakeCoreV1Api]
) -> None:
    api.nodes = {"gpu001": node_doc({}, [GPU]), "gpu002.k8s.example": node_doc({}, [GPU])}
    failures: list[str] = []
    KubernetesAction(False, tmp_path / "kc", failures).pytest_nodegate_admission(doc(), tmp_path)
    assert api.patched == [] and failures == []  # read, never written
    patches = json.loads((tmp_path / PATCHES_FILE).read_text())
    assert sorted(patches) == ["gpu001", "gpu002"]  # gpu001: labels to set, no taint touched
    assert [op for op in patches["gpu001"]["patch"] if "taints" in op["path"]] == []
    got = apply_patch(api.nodes["gpu002.k8s.example"], patches["gpu002"]["patch"])
    assert got["spec"]["taints"] == [GPU, OURS]
    k = json.loads((tmp_path / "actions.json").read_text())["targets"]["kubernetes"]
    assert [(a["node"], a["result"], a["before"]) for a in k["actions"]] == [
        ("gpu001", "planned", {"labels": {}, "taints": [GPU]}),
        ("gpu002", "planned", {"labels": {}, "taints": [GPU]}),
        ("gpu003", "unchanged", None),
    ]
