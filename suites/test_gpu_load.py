"""Stage gpu_load: GPUs under load on every node at once (nvbandwidth copies, DCGM stress
plugins, telemetry sampled under load); checks and their ids in
nodegate.stages.gpu_load.checks."""

from nodegate.session.suite import stage_tests

globals().update(stage_tests("gpu_load", __name__))
