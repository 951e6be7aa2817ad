"""Parsers of the reach stage, on real formats (os-release from this machine's distro family,
/proc/driver/nvidia/version lines as published in public bug reports and docs)."""

import pytest
from nodegate.core.errors import ParseError
from nodegate.parsers.reach import (
    parse_nvidia_version,
    parse_ofed_info,
    parse_os_release,
    parse_uname_r,
)

UBUNTU = """PRETTY_NAME="Ubuntu 22.04.4 LTS"
NAME="Ubuntu"
VERSION_ID="22.04"
VERSION="22.04.4 LTS (Jammy Jellyfish)"
VERSION_CODENAME=jammy
ID=ubuntu
ID_LIKE=debian
HOME_URL="https://www.ubuntu.com/"
UBUNTU_CODENAME=jammy
"""
RHEL = (
    'NAME="Red Hat Enterprise Linux"\nVERSION="9.4 (Plow)"\nID="rhel"\n'
    'ID_LIKE="fedora"\nVERSION_ID="9.4"\n'
)


def test_os_release():
    r = parse_os_release(UBUNTU)
    assert (r.id, r.version_id, r.pretty_name, r.id_like) == (
        "ubuntu",
        "22.04",
        "Ubuntu 22.04.4 LTS",
        ("debian",),
    )
    r = parse_os_release(RHEL)
    assert (r.id, r.version_id, r.id_like) == ("rhel", "9.4", ("fedora",))


@pytest.mark.parametrize(
    "line,ver,open_",
    [
        # As published: a gpu-monitor test fixture, a bug-report capture, a how-to capture.
        (
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.216.03  "
            "Thu Apr  3 01:14:19 UTC 2025",
            "535.216.03",
            False,
        ),
        (
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.195.03  Release Build  "
            "(dvs-builder@U22-I3-H04-03-1)  Sat Sep 20 00:47:16 UTC 2025",
            "570.195.03",
            True,
        ),
        (
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  515.76  Mon Sep 12 19:21:56 UTC 2022",
            "515.76",
            False,
        ),
    ],
)
def test_nvidia_version(line, ver, open_):
    d = parse_nvidia_version(
        line + "\nGCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n"
    )
    assert (d.version, d.open_module, d.arch) == (ver, open_, "x86_64")


def test_ofed_info():
    assert parse_ofed_info("MLNX_OFED_LINUX-23.10-1.1.9.0:\n").version == "23.10-1.1.9.0"
    o = parse_ofed_info("OFED-internal-24.10-1.1.4:")
    assert (o.flavor, o.version) == ("OFED-internal", "24.10-1.1.4")


def test_uname():
    assert parse_uname_r("5.15.0-105-generic\n") == "5.15.0-105-generic"


GARBAGE = "\x1b[31m#!%@ segfault?? 0xdeadbeef\n\x00\x01 ~~~ :: ::\n"


@pytest.mark.parametrize(
    "parser,text",
    [
        (parse_os_release, ""),
        (parse_os_release, GARBAGE),
        (parse_os_release, 'NAME="Ubuntu"\nVERSION_ID="22.04"\n'),  # truncated before ID
        (parse_os_release, 'ID="ubuntu\n'),  # cut inside a quote
        (parse_uname_r, ""),
        (parse_uname_r, GARBAGE),
        (parse_uname_r, "Linux gpu001 5.15.0 #1 SMP x86_64 GNU/Linux\n"),  # uname -a, not -r
        (parse_nvidia_version, ""),
        (parse_nvidia_version, GARBAGE),
        (parse_nvidia_version, "NVRM version: NVIDIA UNIX x86_64 Kernel Mod"),
        (parse_ofed_info, ""),
        (parse_ofed_info, GARBAGE),
        (parse_ofed_info, "MLNX_OFED_LINUX-23.10-1.1.9.0 (OFED-23.10-1.1.9):\n\nPackages:\n-x\n"),
    ],
)
def test_broken_input_is_a_parse_error(parser, text):
    with pytest.raises(ParseError):
        parser(text)
