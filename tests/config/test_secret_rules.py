"""Secrets strong by rule (issue 24, finding 4): an ``[http] token`` of fewer than 16 characters
stops the hub from starting, and ``hub check`` names the key without the value; an empty token
still means "no token"; ``trusted_proxies`` must be addresses or networks."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from hub.cli import main
from hub.config import config_from_dict, load_config
from hub.errors import ConfigError


def write(tmp_path: Path, http: str) -> Path:
    (tmp_path / "contexts").mkdir(exist_ok=True)
    (tmp_path / "contexts" / "default.toml").write_text('name = "Wendy"\ninstructions = "Be brief."\n')
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        textwrap.dedent(f"""
        [hub]
        data_dir = "{tmp_path / "data"}"
        [model]
        provider = "openai"
        base_url = "http://127.0.0.1:9/v1"
        api_key = "k"
        [http]
        {http}
        """)
    )
    return cfg


@pytest.mark.parametrize("token", ["q7", "short-token-15ch"[:15]])
def test_a_short_http_token_is_refused_naming_the_key_not_the_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, token: str
) -> None:
    monkeypatch.setenv("HUB_HTTP_TOKEN", token)
    cfg = write(tmp_path, 'token = "${HUB_HTTP_TOKEN}"')
    with pytest.raises(ConfigError) as e:
        load_config(cfg)  # what `hub run` does first: it never starts
    assert e.value.key == "http.token"
    assert f"is {len(token)} characters: use at least 16" in str(e.value) and "openssl rand -hex 32" in str(e.value)
    assert token not in str(e.value)
    assert main(["check", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "http.token" in err and "use at least 16" in err and token not in err


def test_an_empty_token_is_no_token_and_a_long_one_is_kept(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, 'token = ""')).http.token == ""
    long = "0123456789abcdef"
    assert load_config(write(tmp_path, f'token = "{long}"')).http.token == long


def test_trusted_proxies_are_addresses_or_networks() -> None:
    cfg = config_from_dict({"http": {"trusted_proxies": ["127.0.0.1", "10.0.0.0/8", " ::1 "]}})
    assert cfg.http is not None and cfg.http.trusted_proxies == ["127.0.0.1", "10.0.0.0/8", "::1"]
    with pytest.raises(ConfigError, match=r"http\.trusted_proxies.*'proxy\.example' is not an IP address"):
        config_from_dict({"http": {"trusted_proxies": ["proxy.example"]}})


@pytest.mark.parametrize("token", [" " * 16, "\t" * 20, "   abc123        "])
def test_a_blank_or_padded_short_http_token_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, token: str
) -> None:
    """Whitespace is no secret: 16 spaces would leave the dashboard behind a token anyone guesses."""
    monkeypatch.setenv("HUB_HTTP_TOKEN", token)
    cfg = write(tmp_path, 'token = "${HUB_HTTP_TOKEN}"')
    with pytest.raises(ConfigError) as e:
        load_config(cfg)
    assert e.value.key == "http.token"
    assert main(["check", "--config", str(cfg)]) == 2
    assert "http.token" in capsys.readouterr().err


def test_a_blank_webhook_secret_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        config_from_dict({"http": {}, "webhooks": {"ci": {"context": "chat:1", "secret": " " * 24}}})
    assert e.value.key == "webhooks.ci.secret"
