"""nodegate's hook specifications: where a site or a package plugs into a run.

Implement a hook in a `conftest.py` (the repository's top-level one is the site's place), in a
module given with `-p`, or in an installed package's `pytest11` plugin, as a function of the
same name taking any subset of the arguments (see pytest's own `hookspec.py`). nodegate adds
these specs to pytest's plugin manager in `pytest_addhooks`; the `nodegate` CLI loads the
built-in implementations only (`nodegate.session.transports`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from nodegate.core.settings import Settings
    from nodegate.inventory import Node
    from nodegate.transport.base import Transport
    from nodegate.transport.evidence import EvidenceWriter


@pytest.hookspec
def pytest_nodegate_transport_names() -> Sequence[str]:
    """Return the transport names this plugin builds in `pytest_nodegate_make_transport`.

    Every implementation is called; the union is what `--transport` accepts (an unknown
    name is a usage error that lists them), checked when the run's settings are built.

    The built-in implementation answers ``ssh``, ``local`` and ``replay``.
    """
    raise NotImplementedError


@pytest.hookspec(firstresult=True)
def pytest_nodegate_make_transport(
    settings: Settings, nodes: Sequence[Node], evidence: EvidenceWriter
) -> Transport | None:
    """Build the transport named ``settings.transport``, or return None when it is not yours.

    :param settings: the run's validated settings; ``settings.transport`` is the name asked
        for; ``fanout``, ``connect_timeout_s``, ``accept_new_hostkeys``, ``replay_dir`` are
        the operator's choices for it.
    :param nodes: the selected inventory nodes (names, SSH settings, labels).
    :param evidence: records each node's stage outcome under ``raw/`` (or the capture
        bundle); hand it to ``Transport(evidence=...)``.

    Stops at the first non-None result. The built-in implementation (``trylast``) builds
    ``ssh``, ``local`` and ``replay``, so a plugin may also replace one of those.

    Called through ``nodegate.session.transports.make_transport``: on the pytest controller
    when pytest configures (build without connecting; raise ``nodegate.core.errors.ConfigError``
    for a bad setting: a usage error, exit 4), on an xdist worker when a site check first
    calls ``node.run()``, and by ``nodegate capture``.
    """
    raise NotImplementedError


@pytest.hookspec
def pytest_nodegate_admission(doc: dict[str, Any], run_dir: Path) -> None:
    """The run's final admission document, after ``run_dir/admission.json`` is written.

    :param doc: the admission document (schema ``schemas/admission.schema.json``), equal to
        the file's content; treat it as read-only.
    :param run_dir: the run directory (``reports/<run-id>``).

    Called once per run, on the controller only (never on xdist workers), from
    ``pytest_sessionfinish``, interrupted runs included: their document has ``interrupted``
    (what the run was doing) and admits no node; an action should leave them alone. The
    built-in terminal summary ("nodegate admission", `nodegate.reports.terminal`), ``report.html``
    (`nodegate.reports.html`), the Allure results (`nodegate.reports.allure`, with
    ``--alluredir``), the ``reports/latest`` link and the ``--act`` actions
    (``nodegate.actions``) are implementations; reports and actions plug in the same way. An
    action acts only when ``doc["actionable"]`` (a complete run, or ``--allow-incomplete``;
    never an interrupted run), and takes at most ``doc["guard"]["max_drain"]`` nodes out of
    service, else none (``nodegate.actions.base.refusal``).
    """
