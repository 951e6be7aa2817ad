"""Stage fabric: cabling against the expected topology, the switch side of each rail's cable
(link, errors, XmitWait), partition keys, and the fabric's subnet manager and leaf uplinks
(checks in nodegate.stages.fabric.checks)."""

from nodegate.session.suite import stage_tests

globals().update(stage_tests("fabric", __name__))
