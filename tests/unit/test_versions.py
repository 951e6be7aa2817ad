import pytest
from nodegate.core.versions import VersionRule, numeric_key


def check_version(observed, rule):
    return VersionRule.of(rule).judge(observed)


@pytest.mark.parametrize(
    "v,key",
    [
        ("5.15.0-105-generic", (5, 15, 0, 105)),
        ("535.161.08", (535, 161, 8)),
        ("23.10-1.1.9.0", (23, 10, 1, 1, 9, 0)),
        ("6.8.0-1017-azure", (6, 8, 0, 1017)),
    ],
)
def test_numeric_key(v, key):
    assert numeric_key(v) == key


def test_min_max_and_globs():
    rule = {"allowed": ["5.15.0-*-generic"], "min": "5.15.0-88", "max": "5.15.0-200"}
    assert check_version("5.15.0-105-generic", rule)[0]
    assert not check_version("5.15.0-87-generic", rule)[0]
    assert not check_version("5.15.0-105-azure", rule)[0]
    assert not check_version("5.15.0-201-generic", rule)[0]
    ok, want = check_version("535.161.08", {"min": "535.104.05"})
    assert ok and want == ">= 535.104.05"
    assert not check_version("525.147.05", {"min": "535.104.05"})[0]
    # 23.10 == 23.10.0.0...: a shorter bound pads with zeros
    assert check_version("23.10-1.1.9.0", {"min": "23.10"})[0]
    assert not check_version("23.07-0.5.1.2", {"min": "23.10"})[0]


def test_version_rule_is_typed_once_from_the_profile() -> None:
    rule = VersionRule.of(
        {
            "required": False,
            "allowed": ["5.15.0-*-generic"],
            "min": "5.15.0-88",
            "max": "5.15.0-200",
        }
    )
    assert rule == VersionRule(False, ("5.15.0-*-generic",), "5.15.0-88", "5.15.0-200")
    assert rule.expected() == "one of 5.15.0-*-generic and >= 5.15.0-88 and <= 5.15.0-200"
    assert (rule.holds("5.15.0-105-generic"), rule.holds("5.15.0-87-generic")) == (True, False)
    assert (rule.holds("5.15.0-201-generic"), rule.holds("5.15.0-105-azure")) == (False, False)
    # absent never holds; a rule that says nothing allows any version; required by default
    assert not rule.holds(None)
    assert (
        VersionRule.of({}).expected(),
        VersionRule.of({}).holds("1"),
        VersionRule.of({}).required,
    ) == ("any", True, True)
    # check_version (the mapping form) is the same rule
    assert check_version("5.15.0-87-generic", {"min": "5.15.0-88"}) == (False, ">= 5.15.0-88")
