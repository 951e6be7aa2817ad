"""lspci parser: every lspci capture in the corpus, its quirks, and broken input."""

from __future__ import annotations

import re

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.lspci import parse_lspci
from nodegate.parsers.lspci_select import gpus, mellanox_hcas, nvswitches, pcie_switch_ports

from conftest import CORPUS, check_expected, corpus_text

FILES = sorted(  # `grep Lnk` fragments have their own parser (test_lspci_lnk)
    p.name for p in (CORPUS / "gpu").glob("lspci*") if "-grep-Lnk__" not in p.name
) + sorted(p.name for p in (CORPUS / "net").glob("lspci*"))
VVV = "gpu/lspci-vvv__hgx-h100-8gpu-dell-pex890xx-cx7-nvswitch.txt"
DNN = "gpu/lspci-Dnn__h100-sxm5-8gpu-4nvswitch-passthrough-vm-grep-nvidia.txt"
NN = "gpu/lspci-nn__azure-nd-a100-v4-8gpu-nvswitch-cx6-vf.txt"
PLAIN = "gpu/lspci__gb200-grace-blackwell-cx7-bluefield3.txt"


def _rel(name: str) -> str:
    return f"gpu/{name}" if (CORPUS / "gpu" / name).exists() else f"net/{name}"


@pytest.mark.parametrize("name", FILES)
def test_corpus_expected(name: str) -> None:
    check_expected("lspci", name, parse_lspci(corpus_text(_rel(name))))


def test_corpus_has_all_four_forms() -> None:
    assert len(FILES) == 4


def test_vvv_gpus_short_bdf_old_names_and_links() -> None:
    report = parse_lspci(corpus_text(VVV))
    assert report.verbose and not report.numeric_ids
    found = gpus(report)
    assert len(found) == 8
    gpu = found[0]
    # Short BDF gets domain 0000, raw kept; old pci.ids `Device 2330` yields the device id
    # and no name.
    assert (gpu.bdf, gpu.bdf_raw) == ("0000:19:00.0", "19:00.0")
    assert (gpu.device_name, gpu.device_id, gpu.vendor_id) == (None, "2330", None)
    assert gpu.description == "NVIDIA Corporation Device 2330"
    assert gpu.link_cap is not None and gpu.link_status is not None
    assert (gpu.link_cap.speed_gts, gpu.link_cap.width_lanes, gpu.link_cap.pcie_gen) == (
        32.0,
        16,
        5,
    )
    assert (gpu.link_status.speed_status, gpu.link_status.width_status) == ("ok", "ok")
    assert gpu.target_speed_gts == 32.0 and gpu.max_supported_speed_gts == 32.0
    assert (gpu.numa_node, gpu.kernel_driver, gpu.express_type) == (0, "nvidia", "Endpoint")
    assert gpu.kernel_modules == ("nvidiafb", "nouveau", "nvidia_drm", "nvidia")


def test_vvv_downgraded_speed_and_width_flags() -> None:
    report = parse_lspci(corpus_text(VVV))
    by_bdf = {d.bdf: d for d in report.devices}
    pex = by_bdf["0000:17:00.0"]  # PEX890xx upstream port trained at Gen4
    assert pex.link_status is not None and pex.link_cap is not None
    assert (pex.link_status.speed_gts, pex.link_status.pcie_gen) == (16.0, 4)
    assert (pex.link_status.speed_status, pex.link_status.width_status) == ("downgraded", "ok")
    nic = by_bdf["0000:01:00.0"]  # BCM5720: width downgraded, speed ok
    assert nic.link_status is not None
    assert (nic.link_status.speed_status, nic.link_status.width_status) == ("ok", "downgraded")


def test_vvv_acs_redirect_on_switch_downstream_ports() -> None:
    report = parse_lspci(corpus_text(VVV))
    redirected = [
        d for d in report.devices if d.acs_control is not None and d.acs_control.req_redir
    ]
    assert [d.bdf for d in redirected] == [f"0000:82:0{i}.0" for i in range(4)]
    assert all(d.express_type == "Downstream Port" for d in redirected)
    acs = redirected[0].acs_control
    assert acs is not None and (acs.cmplt_redir, acs.upstream_fwd, acs.egress_ctrl) == (
        True,
        True,
        False,
    )


def test_vvv_selectors() -> None:
    report = parse_lspci(corpus_text(VVV))
    assert [d.device_id for d in nvswitches(report)] == ["22a3"] * 4
    hcas = mellanox_hcas(report)
    assert len(hcas) == 12  # 8x ConnectX-7 + 4x ConnectX-6 Dx
    ports = pcie_switch_ports(report)
    assert all(d.class_name == "PCI bridge" and d.express_type != "Root Port" for d in ports)
    assert sum(d.device_name == "PEX890xx PCIe Gen 5 Switch" for d in ports) == 42
    assert nvswitches(report)[0].physical_slot == "1"


def test_vvv_nested_subsystem_capability_is_not_the_device_subsystem() -> None:
    report = parse_lspci(corpus_text(VVV))
    root = next(d for d in report.devices if d.bdf == "0000:15:01.0")
    # `Capabilities: [94] Subsystem: Intel Corporation Device 0000` is a bridge capability.
    assert root.subsystem is None and root.device_label == "Root Port"


def test_dnn_class_codes_and_new_names() -> None:
    report = parse_lspci(corpus_text(DNN))
    assert report.numeric_ids and not report.verbose
    switch = nvswitches(report)[0]
    assert (switch.class_code, switch.vendor_id, switch.device_id) == ("0680", "10de", "22a3")
    assert switch.device_name == "GH100 [H100 NVSwitch]"
    assert {d.device_name for d in gpus(report)} == {"GH100 [H100 SXM5 80GB]"}
    assert gpus(report)[0].link_status is None  # no -vv, no link facts


def test_nn_hyperv_domains_and_vfs_without_trailing_newline() -> None:
    report = parse_lspci(corpus_text(NN))
    assert len(gpus(report)) == 8 and len(nvswitches(report)) == 6
    assert gpus(report)[-1].bdf == "000e:00:00.0"
    assert report.devices[-1].bdf == "f392:00:00.0"  # last line has no newline
    vfs = [d for d in mellanox_hcas(report) if d.device_id == "101c"]
    assert len(vfs) == 8 and vfs[0].class_code == "0207" and vfs[0].revision is None


def test_plain_gb200_old_names_and_grace_bridges_are_not_nvswitches() -> None:
    report = parse_lspci(corpus_text(PLAIN))
    assert [d.device_id for d in gpus(report)] == ["2941"] * 4
    assert nvswitches(report) == ()  # Grace root ports are `PCI bridge`, not `Bridge`
    assert len(mellanox_hcas(report)) == 8


def test_tolerates_crlf_and_ansi() -> None:
    text = "\x1b[1m19:00.0 3D controller [0302]: NVIDIA Corporation Device [10de:2330]\x1b[0m\r\n"
    dev = parse_lspci(text).devices[0]
    assert (dev.bdf, dev.vendor_id, dev.device_id) == ("0000:19:00.0", "10de", "2330")


def test_merged_pcilib_warnings_are_skipped() -> None:
    text = (
        "pcilib: sysfs_read_vpd: read failed: Input/output error\n"
        "19:00.0 3D controller: NVIDIA Corporation Device 2330 (rev a1)\n"
        "\tNUMA node: 1\n\n"
    )
    (dev,) = parse_lspci(text).devices
    assert dev.numa_node == 1


def test_placeholder_names() -> None:
    text = (
        "0005:00:00.0 Bridge [0680]: NVIDIA Corporation Device [10de:1af1] (rev a1)\n"
        "00:06.0 Ethernet controller: Vendor 1d0f Device efa0\n"
    )
    nvsw, efa = parse_lspci(text).devices
    assert (nvsw.vendor_name, nvsw.device_name, nvsw.device_id) == (
        "NVIDIA Corporation",
        None,
        "1af1",
    )
    assert (efa.vendor_name, efa.vendor_id, efa.device_id) == (None, "1d0f", "efa0")


def test_unknown_link_speed_is_none() -> None:
    text = (
        "01:00.0 Ethernet controller: Intel Corporation X\n"
        "\t\tLnkCap:\tPort #0, Speed unknown, Width x4, ASPM L1\n"
        "\t\tLnkSta:\tSpeed unknown, Width x0\n\n"
    )
    dev = parse_lspci(text).devices[0]
    assert dev.link_status is not None and dev.link_status.speed_gts is None
    assert dev.link_status.width_lanes == 0 and dev.link_status.speed_status is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n\n",
        "hello world\nthis is not lspci\n",
        "\x00\x01\x02garbage\xff\xfe",
        corpus_text("gpu/dcgmi-discovery-l__v100-pcie-16gb-1gpu-dcgm3.3.9.txt"),
        corpus_text("gpu/dmesg__sxid-22013-nvswitch-nonfatal-link-60.txt"),
    ],
    ids=["empty", "blank", "garbage", "binary", "dcgmi-discovery", "dmesg"],
)
def test_broken_input_raises(text: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_lspci(text)
    assert err.value.tool == "lspci"


def test_truncated_vvv_raises() -> None:
    text = corpus_text(VVV)
    with pytest.raises(ParseError, match="lspci"):
        parse_lspci(text[: int(len(text) * 0.4)])


@pytest.mark.parametrize("name", [DNN, NN])
def test_truncated_mid_line_nn_raises(name: str) -> None:
    # The first 40% of these listings ends exactly on a line; cut a little later, mid-line,
    # where the last header loses its [vendor:device] ids.
    text = corpus_text(name)
    ids = re.compile(r"\[[0-9a-f]{4}:[0-9a-f]{4}\]")
    found = ids.search(text, int(len(text) * 0.4) + 5)
    assert found is not None
    cut = found.start() + 3
    with pytest.raises(ParseError, match="ids"):
        parse_lspci(text[:cut])


def test_listing_cut_on_a_line_boundary_is_just_shorter() -> None:
    # A non-verbose listing has no end marker: a cut between lines cannot be seen here; the
    # device-count checks against the profile are what catch it.
    text = corpus_text(DNN)
    report = parse_lspci(text[: int(len(text) * 0.4)])
    assert len(report.devices) == 5 and len(gpus(report)) == 1


def test_vvv_block_cut_at_line_boundary_raises() -> None:
    text = corpus_text(VVV)
    cut = text.index("\tKernel driver in use: nvidia\n")
    with pytest.raises(ParseError, match="truncated"):
        parse_lspci(text[:cut])


def test_malformed_lnksta_raises() -> None:
    text = "19:00.0 3D controller: NVIDIA Corporation Device 2330\n\t\tLnkSta:\tSpeed 32GT/s (o\n\n"
    with pytest.raises(ParseError, match="LnkSta"):
        parse_lspci(text)
