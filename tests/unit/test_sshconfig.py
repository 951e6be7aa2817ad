"""ssh_config resolver: OpenSSH semantics, Include, index, errors, and agreement with `ssh -G`."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
from nodegate.core.errors import ConfigError
from nodegate.inventory.sshconfig import ResolvedHost, SSHConfig

SSH = shutil.which("ssh") or "/usr/bin/ssh"
LOCAL_USER = pwd.getpwuid(os.getuid()).pw_name


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def load(tmp_path: Path, text: str, name: str = "ssh_config") -> SSHConfig:
    return SSHConfig.load(str(write(tmp_path / name, text)))


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    return h


def test_first_obtained_value_wins_in_file_order(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        "Host *\n  User early\nHost gpu1\n  User late\n  Port 2201\nHost gpu*\n  Port 9\n",
    )
    r = cfg.resolve("gpu1")
    assert (r.user, r.port, r.hostname) == ("early", 2201, "gpu1")
    assert cfg.resolve("gpu2").port == 9


def test_unset_values_are_none_not_defaults(tmp_path: Path) -> None:
    r = load(tmp_path, "Host other\n  Port 1\n").resolve("gpu1")
    assert r == ResolvedHost(
        alias="gpu1",
        hostname="gpu1",
        user=None,
        port=None,
        identity_files=(),
        proxy_jump=None,
        user_known_hosts_files=(),
        strict_host_key_checking=None,
        connect_timeout_s=None,
    )


def test_patterns_negation_and_case(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        "Host gpu* !gpu9?\n  Port 1\nHost gpu9?\n  Port 2\nHost ?pu1*\n  User q\n",
    )
    assert cfg.resolve("gpu1").port == 1
    assert cfg.resolve("gpu91").port == 2
    assert cfg.resolve("gpu912").port == 1  # gpu9? needs exactly one char after gpu9
    assert cfg.resolve("cpu10").user == "q"
    # Host patterns match the alias case-sensitively; the final hostname is lowercased.
    upper = cfg.resolve("GPU1")
    assert (upper.port, upper.hostname, upper.alias) == (None, "gpu1", "GPU1")


def test_keyword_forms_quotes_comments(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        "# comment\n"
        "HOST web\n"
        "\tHOSTNAME=Web.Example.COM\n"
        "    port = 2022   # trailing comment\n"
        '    User "alice smith"\n'
        '    IdentityFile "/keys/my key"\n'
        "    IdentityFile /keys/a\\ b\n",
    )
    r = cfg.resolve("web")
    assert r.hostname == "web.example.com"
    assert r.port == 2022
    assert r.user == "alice smith"
    assert r.identity_files == ("/keys/my key", "/keys/a b")


def test_identity_files_accumulate_and_deduplicate(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        "Host gpu1\n  IdentityFile /k/one\nHost *\n  IdentityFile /k/all\n  IdentityFile /k/one\n",
    )
    assert cfg.resolve("gpu1").identity_files == ("/k/one", "/k/all")
    assert cfg.resolve("x").identity_files == ("/k/all", "/k/one")


def test_tokens_and_tilde(tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEYDIR", "/env/keys")
    cfg = load(
        tmp_path,
        "Host gpu1\n"
        "  HostName %h.cluster\n"
        "  User bob\n"
        "  Port 2200\n"
        "  IdentityFile ~/.ssh/id_%h_%n_%p_%r_%u_%%\n"
        "  IdentityFile ${KEYDIR}/%n\n"
        "  IdentityFile %d/k\n"
        "  UserKnownHostsFile ~/kh/%n /abs/kh\n"
        "  ProxyJump %r@jump-%n:22\n",
    )
    r = cfg.resolve("gpu1")
    assert r.hostname == "gpu1.cluster"
    assert r.identity_files == (
        f"{home}/.ssh/id_gpu1.cluster_gpu1_2200_bob_{LOCAL_USER}_%",
        "/env/keys/gpu1",
        f"{home}/k",
    )
    assert r.user_known_hosts_files == (f"{home}/kh/gpu1", "/abs/kh")
    assert r.proxy_jump == "bob@jump-gpu1:22"


def test_tokens_default_port_and_user(tmp_path: Path) -> None:
    r = load(tmp_path, "Host *\n  IdentityFile /k/%r-%p-%L\n").resolve("n1")
    short = socket.gethostname().split(".")[0]
    assert r.identity_files == (f"/k/{LOCAL_USER}-22-{short}",)


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("IdentityFile /k/%C", "%C"),
        ("HostName %n.x", "%n"),
        ("IdentityFile ${NODEGATE_SURELY_UNSET_VAR}", "NODEGATE_SURELY_UNSET_VAR"),
    ],
    ids=["C-token", "n-in-hostname", "unset-env"],
)
def test_unsupported_token_is_config_error_with_line(
    tmp_path: Path, line: str, needle: str
) -> None:
    cfg = load(tmp_path, f"Host x\n  {line}\n")
    with pytest.raises(ConfigError, match=rf"ssh_config:2: .*{needle}"):
        cfg.resolve("x")


def test_match_host_uses_hostname_so_far(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        "Host db*\n  HostName 10.1.0.5\n"
        "Match host 10.1.0.*\n  User dbadmin\n"
        "Match originalhost web*,!web-internal\n  Port 8022\n"
        "Match !host *.internal\n  StrictHostKeyChecking no\n"
        "Match all\n  ConnectTimeout 4\n",
    )
    db = cfg.resolve("db1")
    assert (db.hostname, db.user, db.strict_host_key_checking) == ("10.1.0.5", "dbadmin", "no")
    assert cfg.resolve("web1").port == 8022
    assert cfg.resolve("web-internal").port is None
    assert cfg.resolve("x.internal").strict_host_key_checking is None
    assert cfg.resolve("x.internal").connect_timeout_s == 4.0


@pytest.mark.parametrize(
    "criterion", ["exec true", "user root", "localuser root", "canonical", "final"]
)
def test_unsupported_match_criterion(tmp_path: Path, criterion: str) -> None:
    path = write(tmp_path / "cfg", f"Host a\n  Port 1\nMatch {criterion}\n  Port 2\n")
    with pytest.raises(ConfigError, match=rf"{path}:3: Match criterion"):
        SSHConfig.load(str(path))


def test_proxy_jump_none_and_proxy_command(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        "Host direct\n  ProxyJump none\nHost nocmd\n  ProxyCommand none\n"
        "Host cmd\n  ProxyCommand ssh -W %h:%p bastion\n"
        "Host *\n  ProxyJump ops@bastion:2222,hop2\n",
    )
    assert cfg.resolve("direct").proxy_jump is None
    assert cfg.resolve("nocmd").proxy_jump is None  # ProxyCommand none also blocks ProxyJump
    assert cfg.resolve("other").proxy_jump == "ops@bastion:2222,hop2"
    with pytest.raises(ConfigError, match=r"ssh_config:6: ProxyCommand .* not supported"):
        cfg.resolve("cmd")


def test_strict_host_key_checking_and_timeouts_normalized(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        "Host a\n  StrictHostKeyChecking yes\n  ConnectTimeout 1m30s\n"
        "Host b\n  StrictHostKeyChecking off\n  ConnectTimeout 0\n"
        "Host c\n  StrictHostKeyChecking accept-new\n  Port ssh\n",
    )
    assert (cfg.resolve("a").strict_host_key_checking, cfg.resolve("a").connect_timeout_s) == (
        "yes",
        90.0,
    )
    assert cfg.resolve("b").strict_host_key_checking == "no"
    assert cfg.resolve("b").connect_timeout_s is None  # 0 = no timeout
    assert cfg.resolve("c").strict_host_key_checking == "accept-new"
    assert cfg.resolve("c").port == 22


def test_include_absolute_glob_and_conditional(tmp_path: Path) -> None:
    d = tmp_path / "inc"
    write(d / "conf.d" / "20-b.conf", "Host a1 b1\n  Port 2002\n  HostName b.example\n")
    write(d / "conf.d" / "10-a.conf", "Host a1\n  Port 1001\n  User ua\n")
    write(d / "special.conf", "User sp\nPort 4444\nHost other\n  Port 5555\n")
    cfg = load(
        tmp_path,
        f"Host special\n  Include {d}/special.conf\n  ConnectTimeout 3\n"
        f"Include {d}/missing-*.conf\n"  # still inside `Host special` (indentation is cosmetic)
        f"Match all\nInclude {d}/conf.d/*.conf\n"
        "Host *\n  User last\n",
    )
    assert (cfg.resolve("a1").port, cfg.resolve("a1").user) == (1001, "ua")  # 10-a before 20-b
    assert cfg.resolve("a1").hostname == "b.example"
    assert (cfg.resolve("b1").port, cfg.resolve("b1").user) == (2002, "last")
    sp = cfg.resolve("special")
    assert (sp.user, sp.port, sp.connect_timeout_s) == ("sp", 4444, 3.0)
    assert cfg.resolve("other").port is None  # its Host block only applies inside `Host special`


def test_include_relative_to_dot_ssh(tmp_path: Path, home: Path) -> None:
    write(home / ".ssh" / "cluster.conf", "Host n1\n  Port 7\n")
    assert load(tmp_path, "Include cluster.conf\n").resolve("n1").port == 7


def test_include_loop_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "loop.conf"
    write(path, f"Include {path}\n")
    with pytest.raises(ConfigError, match="nested too deeply"):
        SSHConfig.load(str(path))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Host a\n  Port 70000\n", r":2: bad Port"),
        ("Host a\n  Port abc-not-a-service\n", r":2: bad Port"),
        ("Host a\n  ConnectTimeout soon\n", r":2: bad ConnectTimeout"),
        ("Host a\n  StrictHostKeyChecking maybe\n", r":2: bad StrictHostKeyChecking"),
        ("Host a\n  User\n", r":2: no argument"),
        ('Host a\n  User "unterminated\n', r":2: unterminated"),
        ("Host\n", r":1: no argument"),
        ("Host a\n  HostName a b\n", r":2: hostname takes one argument"),
        ("Host a\n  ProxyJump -oProxyCommand=x\n", r":2: bad ProxyJump"),
        ("Match\n", r":1: no argument"),
        ("Match all host x\n", r":1: 'Match all'"),
        ("Host a\n  Include %d/x\n", r":2: tokens in Include"),
    ],
    ids=[
        "port-range",
        "port-name",
        "timeout",
        "strict",
        "no-arg",
        "quote",
        "host-no-arg",
        "extra-arg",
        "proxyjump",
        "match-no-arg",
        "match-all-plus",
        "include-token",
    ],
)
def test_bad_config_lines(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(tmp_path, text)


def test_unknown_keywords_are_ignored(tmp_path: Path) -> None:
    cfg = load(tmp_path, "Host a\n  ServerAliveInterval 30\n  SomeFutureOption yes\n  Port 5\n")
    assert cfg.resolve("a").port == 5


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope: ssh_config not found"):
        SSHConfig.load(str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match=r"cannot read ssh_config"):
        SSHConfig.load(str(tmp_path))  # a directory


def test_resolves_all_hosts_of_a_1024_host_config(tmp_path: Path) -> None:
    blocks = [
        f"Host gpu{i:04d}\n  HostName 10.0.{i // 256}.{i % 256}\n  Port {2200 + i % 50}\n"
        f"  User u{i % 7}\n"
        for i in range(1, 1025)
    ]
    tail = "Host *\n  User fallback\n  IdentityFile /keys/id_ed25519\n  ConnectTimeout 5\n"
    cfg = load(tmp_path, "".join(blocks) + tail)
    for i in range(1, 1025):
        alias = f"gpu{i:04d}"
        r = cfg.resolve(alias)
        assert (r.hostname, r.port, r.user) == (
            f"10.0.{i // 256}.{i % 256}",
            2200 + i % 50,
            f"u{i % 7}",
        )
        assert r.identity_files == ("/keys/id_ed25519",)
        assert r.connect_timeout_s == 5.0
        # The index: a lookup evaluates the host's own block and the wildcard block only.
        assert cfg.candidates(alias) == (i - 1, 1024)
    assert cfg.resolve("gpu9999").user == "fallback"


# --- agreement with OpenSSH's own resolution (`ssh -G`) --------------------------------------

TRICKY = {
    "patterns": (
        "# leading comment\n"
        "HOST gpu* !gpu9?\n"
        "    hostname=%h.Example.NET\n"
        "    Port = 2201\n"
        '\tUser "alice"   # inline comment\n'
        "Host gpu1 gpu2\n"
        "    Port 2999\n"
        "    IdentityFile /keys/gpu12\n"
        "Host *\n"
        "    User fallback\n"
        "    IdentityFile /keys/all\n"
        "    IdentityFile /keys/gpu12\n"
        "    ConnectTimeout 1m5s\n"
        "    StrictHostKeyChecking accept-new\n"
        '    UserKnownHostsFile /kh/one "/kh/two words" ~/kh3\n',
        ["gpu1", "gpu2", "gpu91", "gpu9", "GPU1", "other"],
    ),
    "match": (
        "Host db*\n    HostName 10.1.0.5\n"
        "Match host 10.1.0.*\n    User dbadmin\n    ProxyJump jumper@bastion:2022\n"
        "Match originalhost web*,!web-internal\n    Port 8022\n"
        "Match !host *.internal\n    StrictHostKeyChecking no\n"
        "Host *.internal\n    HostName %h\n"
        "Match all\n    ConnectTimeout 4\n    ProxyJump none\n",
        ["db1", "web1", "web-internal", "x.internal", "plain"],
    ),
    "jumps": (
        "Host j1\n    ProxyJump none\n    ProxyJump ignored\n"
        "Host j2\n    ProxyJump a@b:22,c\n    StrictHostKeyChecking yes\n"
        "Host j3\n    ProxyCommand none\n    Port ssh\n"
        "Host *\n    ProxyJump default-jump\n    IdentityFile ~/.ssh/id_test\n",
        ["j1", "j2", "j3", "j4"],
    ),
}


def _ssh_g(config: Path, alias: str) -> dict[str, list[str]]:
    out = subprocess.run(
        [SSH, "-G", "-F", str(config), alias],
        capture_output=True,
        text=True,
        check=True,
        timeout=20,
        stdin=subprocess.DEVNULL,
    ).stdout
    values: dict[str, list[str]] = {}
    for line in out.splitlines():
        key, _, value = line.partition(" ")
        values.setdefault(key, []).append(value)
    return values


def _as_ssh_g(r: ResolvedHost) -> dict[str, object]:
    """Our answer in `ssh -G` terms (its defaults where we say 'not set')."""
    strict = {"yes": "true", "no": "false"}.get(r.strict_host_key_checking or "ask")
    return {
        "hostname": r.hostname,
        "user": r.user or LOCAL_USER,
        "port": str(r.port or 22),
        "proxyjump": r.proxy_jump,
        "connecttimeout": "none" if r.connect_timeout_s is None else str(int(r.connect_timeout_s)),
        "stricthostkeychecking": strict or r.strict_host_key_checking or "ask",
        "userknownhostsfile": " ".join(r.user_known_hosts_files) or None,
        "identityfile": list(r.identity_files) or None,
    }


def _include_case(tmp_path: Path) -> tuple[str, list[str]]:
    d = tmp_path / "inc"
    write(d / "conf.d" / "20-b.conf", "Host a1 b1\n  Port 2002\n  HostName b.example\n")
    write(d / "conf.d" / "10-a.conf", "Host a1\n  Port 1001\n  User ua\n")
    write(d / "special.conf", "User sp\nPort 4444\nHost other\n  Port 5555\n")
    text = (
        f"Host special\n  Include {d}/special.conf\n  ConnectTimeout 3\n"
        f"Include {d}/conf.d/*.conf {d}/missing-*.conf\n"
        f"Match all\nInclude {d}/conf.d/*.conf\nHost *\n  User last\n"
    )
    return text, ["a1", "b1", "special", "other"]


@pytest.mark.skipif(not os.path.exists(SSH), reason="OpenSSH client (ssh) not installed")
@pytest.mark.parametrize("name", [*sorted(TRICKY), "include"])
def test_agrees_with_ssh_dash_g(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    # ssh expands ~ from the passwd entry, we from $HOME: make them the same.
    monkeypatch.setenv("HOME", pwd.getpwuid(os.getuid()).pw_dir)
    text, aliases = _include_case(tmp_path) if name == "include" else TRICKY[name]
    path = write(tmp_path / f"{name}.conf", text)
    cfg = SSHConfig.load(str(path))
    for alias in aliases:
        theirs = _ssh_g(path, alias)
        ours = _as_ssh_g(cfg.resolve(alias))
        got = {
            "hostname": theirs["hostname"][0],
            "user": theirs["user"][0],
            "port": theirs["port"][0],
            "proxyjump": theirs.get("proxyjump", [None])[0],
            "connecttimeout": theirs["connecttimeout"][0],
            "stricthostkeychecking": theirs["stricthostkeychecking"][0],
            # ssh -G prints its built-in defaults when nothing is set; compare what we set.
            "userknownhostsfile": theirs["userknownhostsfile"][0]
            if ours["userknownhostsfile"]
            else None,
            "identityfile": [os.path.expanduser(f) for f in theirs["identityfile"]]
            if ours["identityfile"]
            else None,
        }
        assert ours == got, f"{name}: {alias}"


def test_host_key_options(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        "Host a\n  HostKeyAlias node-a\n  CheckHostIP yes\n  HashKnownHosts yes\n"
        "Host b\n  CheckHostIP no\nHost *\n  HashKnownHosts no\n",
    )
    a, b = cfg.resolve("a"), cfg.resolve("b")
    assert (a.host_key_alias, a.check_host_ip, a.hash_known_hosts) == ("node-a", True, True)
    assert (b.host_key_alias, b.check_host_ip, b.hash_known_hosts) == (None, False, False)
    assert cfg.resolve("c").check_host_ip is None  # unset: OpenSSH's default (no) applies


@pytest.mark.parametrize(
    ("text", "msg"),
    [
        ("Host a\n  CheckHostIP maybe\n", ":2: bad CheckHostIP 'maybe' (expected yes or no)"),
        ("Host a\n  HashKnownHosts 2\n", ":2: bad HashKnownHosts '2' (expected yes or no)"),
    ],
)
def test_host_key_option_errors(tmp_path: Path, text: str, msg: str) -> None:
    with pytest.raises(ConfigError) as exc:
        load(tmp_path, text)
    assert str(exc.value).endswith(msg)
