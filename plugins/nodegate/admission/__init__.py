"""Admission as data: the policy a run must cover (`policy`), waivers (`waivers`) and the
remediation class of every verdict (`remediation`); the gate (`gate`) applies them."""
