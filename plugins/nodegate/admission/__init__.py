"""Admission as data: the policy a run must cover (`policy`), waivers (`waivers`) and the
remediation class of every verdict (`remediation`). The gate (`nodegate.admission.gate`)
applies them."""
