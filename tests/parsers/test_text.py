"""Text helpers shared by the parsers: clean lines, plain numbers, natural sort."""

from __future__ import annotations

import pytest
from nodegate.parsers.text import clean_lines, natural_key, number


def test_clean_lines_and_natural_key() -> None:
    assert clean_lines("a \r\n\x1b[1;32mb\x1b[0m\t\n") == ["a", "b", ""]
    names = ["mlx5_10", "mlx5_2", "mlx5_bond_0", "mlx5_1"]
    assert sorted(names, key=natural_key) == ["mlx5_1", "mlx5_2", "mlx5_10", "mlx5_bond_0"]


@pytest.mark.parametrize(
    ("text", "want"),
    [("400", 400), (" -3 ", -3), ("2.5", 2.5), ("100.", 100.0), (".5", 0.5), ("", None)]
    + [("N/A", None), ("4X", None), ("1e3", None)],
)
def test_number(text: str, want: float | None) -> None:
    got = number(text)
    assert got == want and type(got) is type(want)
