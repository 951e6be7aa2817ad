"""`nvidia-smi nvlink -s` parser: link lists, the three no-link variants, bad input."""

from __future__ import annotations

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.nvlink import TOOL, NvlinkCondition, parse_nvlink_errors, parse_nvlink_status

from conftest import CORPUS, check_expected, corpus_text, cut_corpus

FILES = sorted(
    p.name
    for p in (CORPUS / "gpu").glob("nvidia-smi-nvlink-*")
    if not p.name.startswith("nvidia-smi-nvlink-e__")  # error counters: parse_nvlink_errors
)
A100_8 = "gpu/nvidia-smi-nvlink-status__a100-sxm4-80gb-8gpu-12links.txt"
A100_1 = "gpu/nvidia-smi-nvlink-s-i__a100-sxm4-80gb-single-gpu-12links.txt"
H100 = "gpu/nvidia-smi-nvlink-s__h100-80gb-hbm3-18links-driver590.48.01.txt"
INACTIVE = "gpu/nvidia-smi-nvlink-s-i__a100-sxm4-80gb-all-links-inactive.txt"
MIG = "gpu/nvidia-smi-nvlink-s__h100-mig-mode-not-supported-driver590.48.01.txt"
L40S = "gpu/nvidia-smi-nvlink-s__l40s-no-nvlink-driver595.80.txt"


def test_corpus_is_present() -> None:
    assert len(FILES) == 6


@pytest.mark.parametrize("name", FILES)
def test_corpus(name: str) -> None:
    check_expected("nvlink", name, parse_nvlink_status(corpus_text("gpu/" + name)))


def test_eight_gpus_twelve_links_without_trailing_newline() -> None:
    status = parse_nvlink_status(corpus_text(A100_8))
    assert [g.index for g in status.gpus] == list(range(8))
    assert all(len(g.links) == 12 for g in status.gpus)
    assert {link.speed_gbps for g in status.gpus for link in g.links} == {25.0}
    assert status.gpus[7].uuid == "GPU-754035b4-4708-efcd-b261-623aea38bcad"


def test_tab_space_indent_and_single_gpu_index() -> None:
    gpu = parse_nvlink_status(corpus_text(A100_1)).gpus[0]
    assert (gpu.index, gpu.name, len(gpu.links)) == (7, "NVIDIA A100-SXM4-80GB", 12)


def test_fractional_speed() -> None:
    gpu = parse_nvlink_status(corpus_text(H100)).gpus[0]
    assert len(gpu.links) == 18 and gpu.links[17].speed_gbps == 26.562


@pytest.mark.parametrize(
    ("rel", "condition"),
    [
        (INACTIVE, NvlinkCondition.ALL_LINKS_INACTIVE),
        (MIG, NvlinkCondition.MIG_MODE_NOT_SUPPORTED),
        (L40S, NvlinkCondition.NO_NVLINK),
    ],
)
def test_no_link_variants_are_facts(rel: str, condition: NvlinkCondition) -> None:
    gpu = parse_nvlink_status(corpus_text(rel)).gpus[0]
    assert gpu.condition is condition and gpu.links == () and gpu.message


def test_inactive_links() -> None:
    header = "GPU 3: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n"
    text = header + "\t Link 0: 26.562 GB/s\n\t Link 1: <inactive>\n"
    links = parse_nvlink_status(text).gpus[0].links
    assert [(link.active, link.speed_gbps) for link in links] == [(True, 26.562), (False, None)]


def test_crlf_and_ansi_are_tolerated() -> None:
    text = corpus_text(A100_8)
    assert parse_nvlink_status("\x1b[0m" + text.replace("\n", "\r\n")) == parse_nvlink_status(text)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("Lorem ipsum dolor sit amet\n", id="garbage"),
        pytest.param("\x00\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", id="binary"),
        pytest.param(cut_corpus(A100_8), id="truncated-8gpu"),
        # Cut after a whole line inside GPU 4's list. (A cut exactly between two GPUs leaves
        # valid-looking output: the evaluator's GPU count against the profile catches that.)
        pytest.param(
            corpus_text(A100_8)[: corpus_text(A100_8).index("Link 6", 1300)],
            id="truncated-8gpu-line-end",
        ),
        pytest.param(cut_corpus(A100_1), id="truncated-1gpu"),
        pytest.param("GPU 0: NVIDIA A100 (UUID: GPU-1)\n", id="header-only"),
        pytest.param(
            "GPU 0: NVIDIA A100 (UUID: GPU-1)\n\t Link 1: 25 GB/s\n\t Link 0: 25 GB/s\n",
            id="links-out-of-order",
        ),
        pytest.param(
            "GPU 0: NVIDIA A100 (UUID: GPU-1)\nUnable to determine the device handle: Unknown",
            id="unknown-message",
        ),
        pytest.param(
            corpus_text("gpu/nvidia-smi-topo-m__h100-8gpu-vm-tabs-no-nics.txt"), id="topo-m"
        ),
        pytest.param(corpus_text("gpu/nvidia-smi-q__a10-1gpu-driver535.129.03.txt"), id="text-q"),
    ],
)
def test_broken_input_raises(text: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_nvlink_status(text)
    assert info.value.tool == TOOL


ERRORS = (
    "gpu/nvidia-smi-nvlink-e__h100-80gb-hbm3-18links-replay-recovery-crc-elided-uuid-anonymised.txt"
)


def _errors_text() -> str:
    """The capture without the author's own `[...]` elision line (INDEX.md)."""
    return "".join(ln for ln in corpus_text(ERRORS).splitlines(True) if ln.strip() != "[...]")


def test_nvlink_errors_expected() -> None:
    (gpu,) = parse_nvlink_errors(_errors_text())
    check_expected("nvlink_errors", ERRORS, (gpu,))
    assert [lk.link for lk in gpu.links] == [0, 1, 17]
    assert gpu.links[2].counters == (
        ("Replay Errors", 0),
        ("Recovery Errors", 0),
        ("CRC Errors", 0),
    )


def test_nvlink_errors_na_is_none_and_messages() -> None:
    text = _errors_text().replace("Link 1: CRC Errors: 0", "Link 1: CRC Errors: N/A")
    assert parse_nvlink_errors(text)[0].links[1].counters[2] == ("CRC Errors", None)
    mig = parse_nvlink_errors(corpus_text(MIG))  # -e prints the same refusals as -s
    assert mig[0].condition is NvlinkCondition.MIG_MODE_NOT_SUPPORTED


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param("", id="empty"),
        pytest.param("Lorem ipsum dolor sit amet\n", id="garbage"),
        pytest.param("\x00\xff\xfe", id="binary"),
        pytest.param(corpus_text(ERRORS), id="elision-line-kept"),
        pytest.param(corpus_text(H100), id="status-not-errors"),
        pytest.param(
            _errors_text()[: _errors_text().index("Link 0: Recovery") + 10], id="truncated"
        ),
        # Cut at a line end inside link 1: it prints fewer counters than link 0. (A cut inside
        # the first link of the last GPU cannot be told from a shorter counter set.)
        pytest.param(_errors_text()[: _errors_text().index("Link 1: CRC")], id="truncated-link-1"),
        pytest.param(
            _errors_text().rsplit("\n", 2)[0] + "\n", id="truncated-line-end-last-link-short"
        ),
        pytest.param(_errors_text().replace(": 0\n", ": zero\n", 1), id="word-value"),
    ],
)
def test_nvlink_errors_broken(bad: str) -> None:
    with pytest.raises(ParseError):
        parse_nvlink_errors(bad)
