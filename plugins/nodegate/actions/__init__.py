"""Actions on the admission decision: Slurm drain/resume (`slurm`), Kubernetes labels and
taints (`kubernetes`). Each is a `pytest_nodegate_admission` implementation registered by the
plugin for `--act NAME`; dry-run (a plan in `actions.json`) unless `--apply`. A site adds its
own the same way (see `nodegate.session.hookspecs`), acting only when `doc["actionable"]`."""
