"""/sys/module/<m>/initstate parser: every state the kernel prints, broken input."""

from __future__ import annotations

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.module_state import parse_module_initstate


@pytest.mark.parametrize(
    ("text", "live"),
    [("live\n", True), ("live", True), ("coming\n", False), ("going\n", False),
     ("unformed\n", False), ("  live \r\n", True)],
)  # fmt: skip
def test_kernel_states(text: str, live: bool) -> None:
    assert parse_module_initstate(text) is live


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("", "''"),
        ("liv", "'liv'"),  # truncated
        ("#!%@ segfault\n", "'#!%@ segfault'"),
        ("live\nlive\n", "'live\\nlive'"),
        ("\x00\x01\xff" * 30, repr(("\x00\x01\xff" * 30)[:40])),
    ],
    ids=["empty", "truncated", "garbage", "two-lines", "binary"],
)
def test_broken_input(text: str, shown: str) -> None:
    with pytest.raises(ParseError) as exc:
        parse_module_initstate(text)
    assert (exc.value.tool, exc.value.reason) == ("initstate", f"unknown module state {shown}")
