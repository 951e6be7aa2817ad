"""The repository's top-level conftest.py: its worked example gates nodes as a site check."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHECK = "site.test_site_kernel.test_kernel_is_site_approved"


def example() -> str:
    """The site check shown in conftest.py's docstring, as a user would save it."""
    doc = (REPO / "conftest.py").read_text().split('"""')[1]
    lines = [line[4:] for line in doc.splitlines() if line.startswith("    ")]
    return "\n".join(lines) + "\n"


def test_fixture_reads_the_site_setting(request, monkeypatch):
    monkeypatch.setenv("NODEGATE_SITE_KERNELS", " 5.15.0-  6.8.0- ")
    assert request.getfixturevalue("site_kernel_prefixes") == ("5.15.0-", "6.8.0-")


def test_fixture_fails_closed_without_the_setting(request, monkeypatch):
    monkeypatch.delenv("NODEGATE_SITE_KERNELS", raising=False)
    with pytest.raises(pytest.fail.Exception) as exc:
        request.getfixturevalue("site_kernel_prefixes")
    assert str(exc.value) == (
        "set NODEGATE_SITE_KERNELS (kernel release prefixes, space-separated)"
    )


@pytest.mark.parametrize("allowed", ["own", "other"])
def test_worked_example_gates_nodes(tmp_path, allowed):
    """The example, saved as a site check, run on this machine (--transport local)."""
    kernel = platform.release()
    site = tmp_path / "suites"
    site.mkdir()
    (site / "test_site_kernel.py").write_text(example())
    # The site's admission policy: this site check alone (#13: a run must cover the policy).
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "site-kernel.yaml").write_text(
        "name: site-kernel\ndescription: site check only\nextends: generic-hgx-h100\n"
        f"admission: {{require: {{stages: [], also_required: [{CHECK}]}}}}\n"
    )
    (tmp_path / "inv.yaml").write_text(
        "version: 1\ndefaults: {profile: site-kernel}\nnodes: {n1: {}}\n"
    )
    prefixes = kernel if allowed == "own" else "0.0.0- 0.0.1-"
    p = subprocess.run(
        [sys.executable, "-m", "pytest", str(site), "--inventory=inv.yaml", "-p", "conftest"]
        + ["--transport=local", "--reports-dir=reports", "--run-id=r", "-p", "no:cacheprovider"]
        + ["--profiles-dir=profiles"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        # `-p conftest` loads the repository's conftest.py as it loads for suites/ (and the
        # package is this checkout's, whichever one the interpreter has installed)
        env={
            **os.environ,
            "PYTHONPATH": f"{REPO}:{REPO}/plugins",
            "NODEGATE_SITE_KERNELS": prefixes,
        },
    )
    doc = json.loads((tmp_path / "reports" / "r" / "admission.json").read_text())
    assert doc["checks"] == [CHECK]
    node = doc["nodes"]["n1"]
    if allowed == "own":
        assert (p.returncode, node["admitted"], node["reasons"]) == (0, True, []), p.stdout
    else:
        assert (p.returncode, node["admitted"]) == (1, False), p.stdout
        assert [(r["check"], r["status"], r["message"]) for r in node["reasons"]] == [
            (CHECK, "fail", f"AssertionError: n1: {kernel}"),
        ]
