"""``hub check`` validates ``[extensions.whatsapp]`` without connecting to anything: a missing
or short secret, a phone number where its id belongs, an unknown template language, a
missing ``[http]`` endpoint are each named; the secrets never appear in what it prints."""

from __future__ import annotations

from pathlib import Path

import pytest

from hub.cli import main
from hub.testing.whatsapp import APP_SECRET, PHONE_NUMBER_ID, TOKEN, VERIFY_TOKEN

GOOD = {
    "WHATSAPP_PHONE_NUMBER_ID": PHONE_NUMBER_ID,
    "WHATSAPP_TOKEN": TOKEN,
    "WHATSAPP_APP_SECRET": APP_SECRET,
    "WHATSAPP_VERIFY_TOKEN": VERIFY_TOKEN,
}
TABLE = """
[http]
port = 8080

[extensions.whatsapp]
phone_number_id = "${WHATSAPP_PHONE_NUMBER_ID}"
token = "${WHATSAPP_TOKEN}"
app_secret = "${WHATSAPP_APP_SECRET}"
verify_token = "${WHATSAPP_VERIFY_TOKEN}"
webhook_path = "/whatsapp"
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


def test_a_good_table_checks_without_connecting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, v in GOOD.items():
        monkeypatch.setenv(k, v)
    rc, out = check(capsys, project(tmp_path, '\ntemplate = "follow_up"\ntemplate_language = "pt_BR"\n'))
    assert rc == 0, out
    assert "whatsapp" in out  # and the autouse fixture refused any connection off loopback


@pytest.mark.parametrize(
    ("env", "extra", "names"),
    [
        ({"WHATSAPP_APP_SECRET": "short-secret"}, "", "app_secret is 12 characters: use at least 16"),
        ({"WHATSAPP_VERIFY_TOKEN": "abc"}, "", "verify_token is 3 characters"),
        ({"WHATSAPP_TOKEN": ""}, "", "token is empty: set the environment variable WHATSAPP_TOKEN"),
        ({"WHATSAPP_PHONE_NUMBER_ID": "+1 555 078 3881"}, "", "the Phone Number ID (digits), not the phone number"),
        ({}, '\ntemplate_language = "klingon"\n', "'klingon' is not a template language code"),
        ({}, '\nwebhook_path = "whatsapp"\n', "webhook_path must be a path"),
        ({}, '\nbase_url = "graph.example"\n', "base_url must be an http(s) URL"),
        ({}, "\nunknown_key = 1\n", "unknown_key"),
    ],
)
def test_a_bad_table_is_refused_naming_the_key(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    extra: str,
    names: str,
) -> None:
    for k, v in {**GOOD, **env}.items():
        monkeypatch.setenv(k, v)
    table = TABLE.replace('webhook_path = "/whatsapp"\n', "") if "webhook_path" in extra else TABLE
    rc, out = check(capsys, project(tmp_path, extra, table))
    assert rc == 2 and names in out, out
    for secret in (TOKEN, APP_SECRET, VERIFY_TOKEN, "short-secret"):
        assert secret not in out


def test_the_webhook_needs_the_http_endpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, v in GOOD.items():
        monkeypatch.setenv(k, v)
    rc, out = check(capsys, project(tmp_path, table=TABLE.replace("[http]\nport = 8080\n", "")))
    assert rc == 2 and "[http]" in out and "/whatsapp" in out, out
