"""--act kubernetes (#13 item 5): the patch documents, the dry-run file and the apply path
with the official client's API object mocked at its boundary (no cluster here)."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import pytest
from nodegate.actions.kubernetes import PATCHES_FILE, KubernetesAction, label_value, node_patch
from nodegate.core import schemas

XID = {
    "check": "gpu.xid", "status": "fail", "component": "GPU2 0000:4c:00.0 serial 1650",
    "observed": "79", "expected": "no Xid", "unit": "Xid", "evidence": [],
    "message": "Xid 79 x1 (GPU has fallen off the bus: drain_rma)", "remediation": "RMA",
    "remediation_class": "rma",
}  # fmt: skip


def doc(actionable: bool = True) -> dict[str, Any]:
    nodes = {
        "gpu001": {"state": "admitted", "admitted": True, "reasons": [], "labels": {}},
        "gpu002": {"state": "rejected", "admitted": False, "reasons": [XID],
                   "labels": {"k8s_node": "gpu002.k8s.example"}},
        "gpu003": {"state": "not_qualified", "admitted": False, "labels": {},
                   "reasons": [{**XID, "status": "out_of_scope", "message": "x"}]},
    }  # fmt: skip
    return {"run_id": "20261201-000000-ab12", "actionable": actionable, "nodes": nodes,
            "out_of_scope": []}  # fmt: skip


REJECT_PATCH = {
    "metadata": {
        "labels": {
            "nodegate.io/admitted": "false",
            "nodegate.io/run": "20261201-000000-ab12",
            "nodegate.io/remediation": "rma",
        },
        "annotations": {
            "nodegate.io/reason": "nodegate 20261201-000000-ab12: gpu.xid GPU2 Xid 79 x1 "
            "(GPU has fallen off the bus: drain_rma) (rma)"
        },
    },
    "spec": {"taints": [{"key": "nodegate.io/rejected", "value": "gpu.xid_rma",
                         "effect": "NoSchedule"}]},
}  # fmt: skip
ADMIT_PATCH = {
    "metadata": {
        "labels": {
            "nodegate.io/admitted": "true",
            "nodegate.io/run": "20261201-000000-ab12",
            "nodegate.io/remediation": None,
        },
        "annotations": {"nodegate.io/reason": None},
    },
    "spec": {"taints": []},
}


def test_patch_documents() -> None:
    assert node_patch(doc(), "gpu002", None) == REJECT_PATCH
    assert node_patch(doc(), "gpu001", None) == ADMIT_PATCH
    assert node_patch(doc(), "gpu003", None) is None
    other = {"key": "gpu", "value": "broken", "effect": "NoExecute"}
    assert node_patch(doc(), "gpu001", [other])["spec"]["taints"] == [other]
    assert node_patch(doc(), "gpu002", [other])["spec"]["taints"] == [
        other, REJECT_PATCH["spec"]["taints"][0]
    ]  # fmt: skip


def test_label_values_are_valid() -> None:
    assert label_value("a b/c" + "x" * 80)[:6] == "a-b-cx"
    assert len(label_value("x" * 80)) == 63
    assert label_value("-run_") == "run"


def test_dry_run_writes_the_reviewable_patches_and_the_plan(tmp_path: Path) -> None:
    failures: list[str] = []
    KubernetesAction(False, None, failures).pytest_nodegate_admission(doc(), tmp_path)
    patches = json.loads((tmp_path / PATCHES_FILE).read_text())
    assert patches == {
        "gpu001": {"kubernetes_node": "gpu001", "patch": ADMIT_PATCH, "other_taints": "kept"},
        "gpu002": {"kubernetes_node": "gpu002.k8s.example", "patch": REJECT_PATCH,
                   "other_taints": "kept"},
    }  # fmt: skip
    actions = json.loads((tmp_path / "actions.json").read_text())
    schemas.validate("actions", actions)
    k = actions["targets"]["kubernetes"]
    assert (k["mode"], k["skipped"], k["error"], failures) == ("dry-run", None, None, [])
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


def k8s_node(labels: dict[str, str], taints: list[dict[str, str]]) -> Any:
    ts = [types.SimpleNamespace(time_added=None, **t) for t in taints]
    return types.SimpleNamespace(
        metadata=types.SimpleNamespace(labels=labels), spec=types.SimpleNamespace(taints=ts)
    )


class FakeCoreV1Api:
    """The boundary: kubernetes.client.CoreV1Api's read_node and patch_node."""

    nodes: dict[str, Any] = {}
    patched: list[tuple[str, dict[str, Any]]] = []

    def read_node(self, name: str) -> Any:
        if name not in self.nodes:
            raise RuntimeError(f"(404) Reason: Not Found: nodes {name!r} not found")
        return self.nodes[name]

    def patch_node(self, name: str, body: dict[str, Any]) -> Any:
        self.patched.append((name, body))
        labels = {k: v for k, v in body["metadata"]["labels"].items() if v is not None}
        return k8s_node(labels, body["spec"]["taints"])


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


def test_apply_patches_with_the_official_client_keeping_other_taints(
    tmp_path: Path, api: type[FakeCoreV1Api]
) -> None:
    other = {"key": "maintenance", "value": "bios", "effect": "NoSchedule"}
    stale = {"key": "nodegate.io/rejected", "value": "x", "effect": "NoSchedule"}
    api.nodes = {
        "gpu001": k8s_node({"nodegate.io/admitted": "false"}, [other, stale]),
        "gpu002.k8s.example": k8s_node({}, []),
    }
    failures: list[str] = []
    kubeconfig = tmp_path / "kubeconfig"
    KubernetesAction(True, kubeconfig, failures).pytest_nodegate_admission(doc(), tmp_path)
    assert api.loaded == [str(kubeconfig)]  # type: ignore[attr-defined]
    admit = {**ADMIT_PATCH, "spec": {"taints": [other]}}
    assert api.patched == [("gpu001", admit), ("gpu002.k8s.example", REJECT_PATCH)]
    k = json.loads((tmp_path / "actions.json").read_text())["targets"]["kubernetes"]
    assert [(a["node"], a["result"], a["error"]) for a in k["actions"]] == [
        ("gpu001", "applied", None), ("gpu002", "applied", None), ("gpu003", "unchanged", None)
    ]  # fmt: skip
    assert k["actions"][0]["after"]["taints"] == [other]
    assert failures == [] and not (tmp_path / PATCHES_FILE).exists()


def test_apply_is_idempotent_and_reports_a_missing_node(
    tmp_path: Path, api: type[FakeCoreV1Api]
) -> None:
    taint = REJECT_PATCH["spec"]["taints"][0]
    api.nodes = {"gpu001": k8s_node({}, [])}
    already = {k: v for k, v in REJECT_PATCH["metadata"]["labels"].items()}
    api.nodes["gpu002.k8s.example"] = k8s_node(already, [taint])
    api.nodes.pop("gpu001")
    failures: list[str] = []
    KubernetesAction(True, tmp_path / "kc", failures).pytest_nodegate_admission(doc(), tmp_path)
    assert api.patched == []
    k = json.loads((tmp_path / "actions.json").read_text())["targets"]["kubernetes"]
    assert [(a["node"], a["result"]) for a in k["actions"]] == [
        ("gpu001", "failed"), ("gpu002", "unchanged"), ("gpu003", "unchanged")
    ]  # fmt: skip
    assert failures == [
        "kubernetes gpu001: RuntimeError: (404) Reason: Not Found: nodes 'gpu001' not found"
    ]
