"""Stage `ib_pairs`: ib_write_bw per rail between planned node pairs, bad node localized.

Round 1 pairs every node (partners under different leaves by default); a pair that fails on a
rail is split and each member retested against nodes that passed that rail (rounds 2 and 3).
The plan and the localization are in reports/<run>/ib_pairs/.
"""


def test_rail_bandwidth(nodegate_check):
    """ib_pairs.rail.bandwidth: the rail reaches the profile's floor with a good partner."""
    nodegate_check.assert_pass()


def test_no_stray_perftest(nodegate_check):
    """ib_pairs.cleanup: no ib_write_bw process is left on the node after the stage."""
    nodegate_check.assert_pass()
