"""`nvidia-smi topo -m` parser: matrices with and without NICs, tabs, ANSI, bad input."""

from __future__ import annotations

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.topo import TOOL, parse_topo_matrix

from conftest import CORPUS, check_expected, corpus_text, cut_corpus

FILES = sorted(p.name for p in (CORPUS / "gpu").glob("nvidia-smi-topo-m__*"))
A100 = "gpu/nvidia-smi-topo-m__a100-sxm4-80gb-8gpu-8nic-roce-nic-legend-driver525.txt"
H100_TABS = "gpu/nvidia-smi-topo-m__h100-8gpu-vm-tabs-no-nics.txt"
H200_ANSI = "gpu/nvidia-smi-topo-m__h200-1gpu-ansi-underline-gpu-numa-id-driver590.48.01.txt"
V100 = "gpu/nvidia-smi-topo-m__v100-pcie-8gpu-2nic-mlx5-names-driver470.txt"


def test_corpus_is_present() -> None:
    assert len(FILES) == 4


@pytest.mark.parametrize("name", FILES)
def test_corpus(name: str) -> None:
    check_expected("topo", name, parse_topo_matrix(corpus_text("gpu/" + name)))


def test_nic_legend_and_gpu_nic_paths() -> None:
    topo = parse_topo_matrix(corpus_text(A100))
    assert topo.nic_names["NIC7"] == "mlx5_7"
    rows = {row.device: row for row in topo.rows}
    assert rows["GPU0"].links["NIC0"] == "PXB" and rows["GPU0"].links["NIC4"] == "SYS"
    assert rows["GPU4"].cpu_affinity_ranges == ((32, 63), (96, 127))
    assert rows["GPU4"].numa_affinity == 1 and rows["GPU4"].gpu_numa_id is None
    assert rows["NIC0"].cpu_affinity is None and rows["NIC0"].links["NIC1"] == "PIX"
    assert topo.legend["NV#"] == "Connection traversing a bonded set of # NVLinks"


def test_tab_separated_with_empty_cell_before_gpu_numa_id() -> None:
    topo = parse_topo_matrix(corpus_text(H100_TABS))
    assert topo.devices == tuple(f"GPU{i}" for i in range(8))
    row = topo.rows[3]
    assert row.links["GPU3"] == "X" and row.links["GPU0"] == "NV18"
    assert (row.cpu_affinity, row.numa_affinity, row.gpu_numa_id) == ("0-63", 0, None)


def test_ansi_underlined_header_single_gpu() -> None:
    topo = parse_topo_matrix(corpus_text(H200_ANSI))
    assert topo.devices == ("GPU0",)
    assert topo.rows[0].cpu_affinity_ranges == ((0, 23),)


def test_old_mlx5_column_names_without_nic_legend() -> None:
    topo = parse_topo_matrix(corpus_text(V100))
    assert topo.devices[-2:] == ("mlx5_0", "mlx5_1") and topo.nic_names == {}
    assert topo.rows[-1].links == {
        **{f"GPU{i}": "SYS" for i in range(8)},
        "mlx5_0": "PIX",
        "mlx5_1": "X",
    }


def test_gpu_numa_id_number() -> None:
    text = "\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \t0-71\t0\t\t2\n"
    assert parse_topo_matrix(text).rows[0].gpu_numa_id == 2


def test_crlf_and_ansi_are_tolerated() -> None:
    text = corpus_text(A100)
    assert parse_topo_matrix("\x1b[0m" + text.replace("\n", "\r\n")) == parse_topo_matrix(text)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("Lorem ipsum dolor sit amet\nconsectetur\n", id="garbage"),
        pytest.param("\x00\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", id="binary"),
        pytest.param(cut_corpus(A100), id="truncated"),
        pytest.param(cut_corpus(A100, at_line_end=True), id="truncated-line-end"),
        pytest.param(cut_corpus(V100), id="truncated-v100"),
        pytest.param(corpus_text(A100).split("NIC Legend:")[0], id="nic-legend-missing"),
        pytest.param("\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tFOO\t X \n", id="unknown-kind"),
        pytest.param("\tGPU0\tGPU1\nGPU0\tNV4\t X \nGPU1\tNV4\t X \n", id="bad-diagonal"),
        pytest.param(
            corpus_text("gpu/nvidia-smi-nvlink-status__a100-sxm4-80gb-8gpu-12links.txt"),
            id="nvlink-status",
        ),
        pytest.param(corpus_text("gpu/nvidia-smi-q__a10-1gpu-driver535.129.03.txt"), id="text-q"),
    ],
)
def test_broken_input_raises(text: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_topo_matrix(text)
    assert info.value.tool == TOOL
