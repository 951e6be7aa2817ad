"""Stage roce: RoCE QoS, ECN, RoCE mode/ToS, GID, addressing, sysctls and congestion counters
per RoCE rail, and the fleet's duplicate addresses and majority configuration (checks in
nodegate.stages.roce.checks)."""

from nodegate.session.suite import stage_tests

globals().update(stage_tests("roce", __name__))
