"""Text helpers every parser shares: clean lines, plain numbers, natural sort of device names.

>>> sorted(["mlx5_10", "mlx5_2"], key=natural_key)
['mlx5_2', 'mlx5_10']
"""

from __future__ import annotations

import re

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def clean_lines(text: str) -> list[str]:
    """Split tool output into lines without CR, ANSI colour escapes or trailing blanks."""
    text = _ANSI_RE.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    return [line.rstrip() for line in text.split("\n")]


def number(text: str) -> float | None:
    """'400' -> 400, '2.5' -> 2.5, anything else -> None (ints stay ints for readable facts)."""
    text = text.strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.fullmatch(r"-?\d+\.\d*|-?\d*\.\d+", text):
        return float(text)
    return None


def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key so mlx5_2 sorts before mlx5_10."""
    parts = re.split(r"(\d+)", name)
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in parts if p != "")
