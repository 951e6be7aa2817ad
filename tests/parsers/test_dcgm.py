"""dcgmi parsers: diag tables (DCGM 3.x/4.x, -v), diag -j JSON; quirks; bad input."""

from __future__ import annotations

import json

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.dcgm import TOOL, DcgmDiag, DiagResult, DiagTest, parse_dcgmi_diag
from nodegate.parsers.dcgm_json import diag_test_from_json, parse_dcgmi_diag_json

from conftest import CORPUS, check_expected, corpus_text

# `dcgmi discovery -l` has no parser (no stage reads it): its capture is only bad input here.
FILES = sorted(p.name for p in (CORPUS / "gpu").glob("dcgmi-diag*"))
R1 = "gpu/dcgmi-diag-r1__v100-pcie-16gb-dcgm3.3.9-driver560.35.03.txt"
R2 = "gpu/dcgmi-diag-r2__a100-sxm4-80gb-8gpu-aws-p4de-dcgm3.3.3-driver535.104.12.txt"
R3V = "gpu/dcgmi-diag-r3-v__v100-pcie-16gb-dcgm3.3.9-driver560.35.03-verbose-info-rows.txt"
R3 = "gpu/dcgmi-diag-r3__h100-8gpu-dcgm3.3.8-driver560.35.03-cuda-init-fail-no-fabricmanager.txt"
L40S = "gpu/dcgmi-diag__l40s-4gpu-dcgm4.2.3-driver570.148.08-pcie-fail-new-format.txt"
GB10 = (
    "gpu/dcgmi-diag-r1-j__gb10-dgx-spark-dcgm4.2.3-driver580.82.09-software-fail-persistence.json"
)
FRAGMENT = "gpu/dcgmi-diag-j__8gpu-dcgm4-diagnostic-test-entity-results-info-capped-fragment.txt"
DISCOVERY = "gpu/dcgmi-discovery-l__v100-pcie-16gb-1gpu-dcgm3.3.9.txt"
TABLES = [R1, R2, R3V, R3, L40S]


def _parse(name: str) -> tuple[str, object]:
    """-> (expected-dir name, facts) for one corpus file, by its command."""
    text = corpus_text(f"gpu/{name}")
    if name == FRAGMENT.removeprefix("gpu/"):
        # A fragment is refused as a document (see test below); its one test object is still
        # checked whole, through the function the document parser uses per test.
        return "dcgmi_diag_json", diag_test_from_json(json.loads(text.strip().rstrip(",")), None)
    if name.startswith("dcgmi-diag") and "-j" in name.split("__")[0]:
        return "dcgmi_diag_json", parse_dcgmi_diag_json(text)
    return "dcgmi_diag", parse_dcgmi_diag(text)


@pytest.mark.parametrize("name", FILES)
def test_corpus_expected(name: str) -> None:
    parser_name, facts = _parse(name)
    check_expected(parser_name, name, facts)


def test_corpus_count() -> None:
    assert len(FILES) == 8


def _test(diag: DcgmDiag, name: str) -> DiagTest:
    return next(t for t in diag.tests if t.name == name)


def test_r1_metadata_and_deployment_only() -> None:
    diag = parse_dcgmi_diag(corpus_text(R1))
    assert (diag.dcgm_version, diag.driver_version, diag.gpu_device_ids) == (
        "3.3.9",
        "560.35.03",
        ("1db4",),
    )
    assert diag.categories == ("Deployment",) and len(diag.tests) == 9
    assert {t.result for t in diag.tests} == {DiagResult.PASS} and diag.complete


def test_r2_empty_stress_section_and_pass_all() -> None:
    diag = parse_dcgmi_diag(corpus_text(R2))
    assert diag.categories == ("Deployment", "Integration", "Hardware", "Stress")
    assert not any(t.category == "Stress" for t in diag.tests)
    pcie = _test(diag, "PCIe")
    assert (pcie.result, pcie.result_raw, pcie.all_entities) == (
        DiagResult.PASS,
        "Pass - All",
        True,
    )
    assert len(diag.gpu_device_ids) == 8


def test_r3v_wrapped_info_rows_rejoined_mid_word() -> None:
    diag = parse_dcgmi_diag(corpus_text(R3V))
    (info,) = _test(diag, "PCIe").info
    # Cells wrap at 45 characters, mid-word: `GP` + `U to Host` must read `GPU to Host`.
    assert "GPU 0 GPU to Host latency:  2.028 us, GPU 0 Host to GPU latency" in info.text
    assert info.text.endswith("bidirectional latency:  3.865 us")
    assert (info.entity_group, info.entity_id) == ("GPU", 0)
    assert "21688.18 gigaflops" in _test(diag, "Diagnostic").info[0].text
    assert _test(diag, "EUD Test").result is DiagResult.SKIP


def test_r3_fail_all_with_eight_wrapped_warnings() -> None:
    diag = parse_dcgmi_diag(corpus_text(R3))
    mem = _test(diag, "GPU Memory")
    assert mem.result is DiagResult.FAIL and mem.all_entities
    assert [w.entity_id for w in mem.warnings] == list(range(8))
    assert "Unable to initialize CUDA library: 'system not yet initialized'" in mem.warnings[0].text
    assert mem.warnings[0].text.endswith("Refer to https://github.com/nvidia/cuda-samples")
    # DCGM itself truncated this Info cell; it is kept as printed.
    assert _test(diag, "Persistence Mode").info[0].text.endswith("GPU 4 is disabled. Enable pers")
    assert _test(diag, "PCIe").result is DiagResult.SKIP


def test_l40s_dcgm4_per_gpu_rows_and_unclosed_table() -> None:
    diag = parse_dcgmi_diag(corpus_text(L40S))
    assert diag.gpu_device_ids == ("26b9",) * 4
    pcie = _test(diag, "pcie")
    assert pcie.result is DiagResult.FAIL and pcie.category == "Integration"
    assert [(e.entity_id, e.result) for e in pcie.entities] == [
        (i, DiagResult.PASS) for i in range(4)
    ]
    assert len(pcie.warnings) == 4
    assert pcie.warnings[0].text.endswith("Reset GPU. Restart DCGM. Rerun diagnostics.")
    # Published without the closing border; accepted because every GPU's row is there.
    assert diag.complete is False


def test_json_gb10_software_fail_with_error_codes() -> None:
    diag = parse_dcgmi_diag_json(corpus_text(GB10))
    (sw,) = diag.tests
    assert (sw.name, sw.category, sw.result) == ("software", "Deployment", DiagResult.FAIL)
    (warn,) = sw.warnings
    assert (warn.entity_id, warn.error_id, warn.error_category, warn.error_severity) == (
        0,
        29,
        8,
        5,
    )
    assert "9223372036854775794" in sw.info[0].text and sw.info[0].entity_id is None
    (ent,) = diag.entities
    assert (ent.device_id, ent.serial) == ("2e12", None)  # <<<NOT_SUPPORTED>>> is absent
    assert (diag.dcgm_version, diag.driver_version) == ("4.2.3", "580.82.09")


def test_json_fragment_is_refused_but_its_test_reads() -> None:
    text = corpus_text(FRAGMENT)
    with pytest.raises(ParseError, match="fragment"):
        parse_dcgmi_diag_json(text)
    test = diag_test_from_json(json.loads(text.strip().rstrip(",")), None)
    assert test.name == "diagnostic" and test.result is DiagResult.PASS
    assert [e.entity_id for e in test.entities] == list(range(8))
    # DCGM 4's 16-message cap: info only for entities 0-2 (3 + 3 + 2 messages).
    assert [m.entity_id for m in test.info] == [0, 0, 0, 1, 1, 1, 2, 2]


def test_json_runtime_error_and_no_tests() -> None:
    with pytest.raises(ParseError, match="did not run"):
        parse_dcgmi_diag_json('{"DCGM Diagnostic": {"runtime_error": "Error: no GPUs"}}')
    with pytest.raises(ParseError, match="no tests"):
        parse_dcgmi_diag_json('{"DCGM Diagnostic": {"test_categories": []}}')
    with pytest.raises(ParseError, match="unknown result"):
        parse_dcgmi_diag_json(
            '{"DCGM Diagnostic": {"test_categories": [{"category": "x", "tests": '
            '[{"name": "t", "results": [], "test_summary": {"status": "Great"}}]}]}}'
        )


def test_dcgm3_split_result_lines() -> None:
    text = (
        "+---------------------------+------------------------------------------------+\n"
        "| Diagnostic                | Result                                         |\n"
        "+===========================+================================================+\n"
        "+-----  Stress  ------------+------------------------------------------------+\n"
        "| Memory Bandwidth          | Pass - GPUs: 0, 1, 2                           |\n"
        "|                           | Fail - GPU: 3                                  |\n"
        "+---------------------------+------------------------------------------------+\n"
    )
    (test,) = parse_dcgmi_diag(text).tests
    assert test.result is DiagResult.FAIL and not test.all_entities
    assert [(e.entity_id, e.result.value) for e in test.entities] == [
        (0, "Pass"),
        (1, "Pass"),
        (2, "Pass"),
        (3, "Fail"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "hello world\nnot dcgmi\n",
        "\x00\x01\x02garbage\xff\xfe",
        "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n",
        corpus_text("gpu/lspci-Dnn__h100-sxm5-8gpu-4nvswitch-passthrough-vm-grep-nvidia.txt"),
        corpus_text(DISCOVERY),
    ],
    ids=["empty", "garbage", "binary", "hostengine-error", "lspci", "discovery"],
)
def test_diag_broken_input_raises(text: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_dcgmi_diag(text)
    assert err.value.tool == TOOL


@pytest.mark.parametrize(
    "text",
    ["", "garbage", "\x00\x01", "[]", '{"other": 1}', corpus_text(R1)],
    ids=["empty", "garbage", "binary", "list", "other-json", "table"],
)
def test_json_broken_input_raises(text: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_dcgmi_diag_json(text)
    assert err.value.tool == TOOL


@pytest.mark.parametrize("name", [*TABLES, GB10])
def test_truncated_raises(name: str) -> None:
    text = corpus_text(name)
    cut = text[: int(len(text) * 0.4)]
    parser = parse_dcgmi_diag_json if name == GB10 else parse_dcgmi_diag
    with pytest.raises(ParseError) as err:
        parser(cut)
    assert err.value.tool == TOOL


@pytest.mark.parametrize("name", TABLES)
def test_table_cut_on_a_row_boundary_raises(name: str) -> None:
    lines = corpus_text(name).splitlines(keepends=True)
    with pytest.raises(ParseError, match="truncated"):
        parse_dcgmi_diag("".join(lines[: len(lines) // 2]))


def test_full_width_cell_keeps_its_last_characters() -> None:
    """DCGM 4.x writes ids `, `-separated: eight of them fill the Result cell to one space
    before the border (the L40S capture's layout, widened to an 8-GPU node)."""
    ids = ", ".join(["2901"] * 8)
    text = corpus_text(R2).replace(
        "| 20b2,20b2,20b2,20b2,20b2,20b2,20b2,20b2        |", f"| {ids} |"
    )
    assert f"| {ids} |" in text
    assert parse_dcgmi_diag(text).gpu_device_ids == ("2901",) * 8
