"""The site's own fixtures and hooks: pytest loads this file for every run in this checkout.

Site checks are tests in `suites/` that take the `node` fixture (README, "Site checks"); the
fixtures below are theirs to use, and nodegate's hooks (`nodegate.session.hookspecs`, e.g.
`pytest_nodegate_admission(doc, run_dir)`) can be implemented here as well. Worked example,
opt-in: save as `suites/test_site_kernel.py`, then run
`NODEGATE_SITE_KERNELS="5.15.0-" pytest suites --inventory inv.yaml`:

    def test_kernel_is_site_approved(node, site_kernel_prefixes):
        r = node.run("uname -r")
        assert r.rc == 0, r.stderr
        assert r.stdout.startswith(site_kernel_prefixes), f"{node.name}: {r.stdout.strip()}"

Its outcome gates each node as check `site.test_site_kernel.test_kernel_is_site_approved`.
"""

from __future__ import annotations

import os

import pytest

SITE_KERNELS_ENV = "NODEGATE_SITE_KERNELS"


@pytest.fixture
def site_kernel_prefixes() -> tuple[str, ...]:
    """Kernel releases this site runs, as prefixes: NODEGATE_SITE_KERNELS="5.15.0- 6.8.0-"."""
    prefixes = tuple(os.environ.get(SITE_KERNELS_ENV, "").split())
    if not prefixes:
        # Fail closed: a site check without its site's setting must not pass.
        pytest.fail(f"set {SITE_KERNELS_ENV} (kernel release prefixes, space-separated)")
    return prefixes
