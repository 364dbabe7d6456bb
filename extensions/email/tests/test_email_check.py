"""``hub check`` validates ``[extensions.email]`` without connecting to anything: a missing
host or password, ``tls = "none"`` towards a host off loopback, a bad address, folder or
sender are each named; the password never appears in what it prints. A short password is
accepted: the provider chose it, and the hub authenticates nobody with it (the 16-character
rule is for the secrets the hub itself checks, as a webhook's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hub.cli import main

PASSWORD = "a-mailbox-password-0123456789"
TABLE = """
[extensions.email]
imap_host = "imap.example.org"
smtp_host = "smtp.example.org"
username = "bot@example.org"
password = "${EMAIL_PASSWORD}"
"""


def project(tmp_path: Path, extra: str = "", table: str = TABLE) -> Path:
    (tmp_path / "contexts").mkdir(exist_ok=True)
    config = tmp_path / "config.toml"
    config.write_text('[hub]\ndata_dir = "data"\n' + table + extra)
    return config


def check(capsys: pytest.CaptureFixture[str], config: Path) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["check", "--config", str(config)])
    out, err = capsys.readouterr()
    return rc, out + err


@pytest.mark.parametrize(
    "extra",
    [
        "",
        '\ntls = "starttls"\nimap_port = 143\nsmtp_port = 587\nallowed_senders = ["@example.com", "bob@example.net"]\n',
        '\nimap_host = "127.0.0.1"\nsmtp_host = "localhost"\ntls = "none"\n',
    ],
)
def test_a_good_table_checks_without_connecting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, extra: str
) -> None:
    monkeypatch.setenv("EMAIL_PASSWORD", PASSWORD)
    table = TABLE
    for key in ("imap_host", "smtp_host"):
        if key in extra:
            table = "\n".join(line for line in table.splitlines() if not line.startswith(key)) + "\n"
    rc, out = check(capsys, project(tmp_path, extra, table))
    assert rc == 0, out
    assert "email" in out and PASSWORD not in out  # the autouse fixture refused any connection off loopback


def test_a_short_password_is_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMAIL_PASSWORD", "hunter2")
    rc, out = check(capsys, project(tmp_path))
    assert rc == 0, out


@pytest.mark.parametrize(
    ("password", "extra", "drop", "names"),
    [
        ("", "", "", "password is empty: set the environment variable EMAIL_PASSWORD"),
        (PASSWORD, '\ntls = "none"\n', "", 'tls = "none" sends the password in the clear: only to a loopback host'),
        (PASSWORD, '\ntls = "ssl"\n', "", "tls"),
        (PASSWORD, "", "imap_host", "imap_host is empty"),
        (PASSWORD, '\nsmtp_host = "smtps://smtp.example.org"\n', "smtp_host", "smtp_host is a host name"),
        (PASSWORD, '\nusername = "bot"\n', "username", "address is empty and username is not an address"),
        (PASSWORD, '\naddress = "Bot <bot@example.org>"\n', "", "address must be the bot's bare address"),
        (PASSWORD, '\nallowed_senders = ["alice"]\n', "", "'alice' is neither an address"),
        (PASSWORD, '\nfolder = ""\n', "", "folder must be a folder name"),
        (PASSWORD, '\nfolder = "Entrée"\n', "", "folder must be an ASCII name"),
        (PASSWORD, "\nimap_port = 0\n", "", "imap_port"),
        (PASSWORD, "\nunknown_key = 1\n", "", "unknown_key"),
    ],
)
def test_a_bad_table_is_refused_naming_the_key(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    password: str,
    extra: str,
    drop: str,
    names: str,
) -> None:
    monkeypatch.setenv("EMAIL_PASSWORD", password)
    table = TABLE
    if drop:
        table = "\n".join(line for line in table.splitlines() if not line.startswith(drop)) + "\n"
    rc, out = check(capsys, project(tmp_path, extra, table))
    assert rc == 2 and names in out, out
    assert PASSWORD not in out
