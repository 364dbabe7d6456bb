"""``hub check`` validates ``[extensions.signal]`` without connecting to anything: a missing
or malformed number, a short proxy token, a group id that is not one, a URL that is not
the API's are each named; the token never appears in what it prints."""

from __future__ import annotations

from pathlib import Path

import pytest

from hub.cli import main
from hub.testing.signal import GROUP, NUMBER

TOKEN = "proxy-token-0123456789abcdef"
TABLE = """
[extensions.signal]
url = "http://127.0.0.1:8080"
number = "${SIGNAL_NUMBER}"
"""


def project(tmp_path: Path, extra: str = "") -> Path:
    (tmp_path / "contexts").mkdir(exist_ok=True)
    config = tmp_path / "config.toml"
    table = TABLE.replace('url = "http://127.0.0.1:8080"\n', "") if extra.startswith("url =") else TABLE
    config.write_text('[hub]\ndata_dir = "data"\n' + table + extra)
    return config


def check(capsys: pytest.CaptureFixture[str], config: Path) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["check", "--config", str(config)])
    out, err = capsys.readouterr()
    return rc, out + err


def test_a_good_table_checks_without_connecting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SIGNAL_NUMBER", NUMBER)
    monkeypatch.setenv("SIGNAL_PROXY_TOKEN", TOKEN)
    extra = f'token = "${{SIGNAL_PROXY_TOKEN}}"\nallowed_groups = ["{GROUP}"]\nallowed_users = ["+1 555 765 4321"]\n'
    rc, out = check(capsys, project(tmp_path, extra))
    assert rc == 0, out
    assert "signal" in out and TOKEN not in out  # and the autouse fixture refused any connection off loopback


@pytest.mark.parametrize(
    ("number", "extra", "names"),
    [
        ("", "", "number is empty: set it to the bot's Signal number"),
        ("15550001111", "", "'15550001111' is not a phone number in international form"),
        (NUMBER, 'token = "short-token"\n', "token is 11 characters: use at least 16"),
        (NUMBER, 'allowed_groups = ["my-group"]\n', "'my-group' is not a Signal group id"),
        (NUMBER, 'groups = ["group.bm90LWJhc2U2NA=="]\n', "is not a Signal group id"),
        (NUMBER, 'bots = ["otherbot"]\n', "'otherbot' is neither a phone number"),
        (NUMBER, 'quote = "sometimes"\n', "extensions.signal.quote"),
        (NUMBER, 'url = "signal-api:8080"\n', "url must be signal-cli-rest-api's http(s) URL"),
        (NUMBER, "unknown_key = 1\n", "unknown_key"),
    ],
)
def test_a_bad_table_is_refused_naming_the_key(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    number: str,
    extra: str,
    names: str,
) -> None:
    monkeypatch.setenv("SIGNAL_NUMBER", number)
    rc, out = check(capsys, project(tmp_path, extra))
    assert rc == 2 and names in out, out
    assert "short-token" not in out
