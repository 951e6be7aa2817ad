"""Admission as data: the policy a run must cover (`policy`), waivers (`waivers`) and the
remediation class of every verdict (`remediation`). The gate (`nodegate.gate`) applies them."""
