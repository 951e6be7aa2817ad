"""The built-in actions `--act` names, built when pytest configures (checked: exit 4)."""

from __future__ import annotations

from nodegate.actions.kubernetes import KubernetesAction
from nodegate.actions.slurm import SlurmAction
from nodegate.core.errors import ConfigError
from nodegate.core.settings import Settings


def make_actions(settings: Settings, failures: list[str]) -> dict[str, object]:
    """The action plugins of `settings.act`; ConfigError when one cannot work here (scontrol
    missing or not answering, the Kubernetes client not installed for --apply)."""
    out: dict[str, object] = {}
    for name in settings.act:
        if name == "slurm":
            slurm = SlurmAction(settings.apply, failures)
            slurm.check_usable()
            out[name] = slurm
        elif name == "kubernetes":
            if settings.apply or settings.kubeconfig is not None:  # a dry-run reads the nodes
                try:
                    import kubernetes  # noqa: F401
                except ImportError:
                    raise ConfigError(
                        "--act kubernetes --kubeconfig: the Kubernetes client is not installed "
                        "(pip install 'nodegate[kubernetes]')"
                    ) from None
            out[name] = KubernetesAction(settings.apply, settings.kubeconfig, failures)
    return out
