"""PCI address and PCIe generation helpers shared by the parsers."""

from __future__ import annotations

import pytest
from nodegate.parsers.pci import normalize_bdf, pcie_gen


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("9b:00.0", "0000:9b:00.0"),
        ("PCI:0000:52:00", "0000:52:00.0"),
        ("00000000:83:00.0", "0000:83:00.0"),
        ("0001:43:00.0", "0001:43:00.0"),
        ("0000:9B:00.0", "0000:9b:00.0"),
        ("not-a-bdf", None),
    ],
)
def test_normalize_bdf(raw: str, want: str | None) -> None:
    assert normalize_bdf(raw) == want


def test_pcie_gen_map() -> None:
    assert [pcie_gen(s) for s in (2.5, 5.0, 8.0, 16.0, 32.0, 64.0, 3.0, None)] == [
        1,
        2,
        3,
        4,
        5,
        6,
        None,
        None,
    ]
