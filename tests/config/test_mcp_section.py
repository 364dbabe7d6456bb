"""``[mcp.NAME]``, ``[model] prompt_style = "tools"`` and ``[agent] skills_dir`` in config.toml."""

from __future__ import annotations

import pytest

from hub.config import config_from_dict, load_config
from hub.errors import ConfigError


def test_an_mcp_server_takes_a_command_or_a_url() -> None:
    c = config_from_dict(
        {
            "model": {"prompt_style": "tools"},
            "mcp": {
                "time": {"command": ["mcp-server-time", "--local-timezone", "UTC"], "env": {"TZ": "UTC"}},
                "docs": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer x"}},
            },
        }
    )
    assert c.mcp["time"].timeout == 30 and c.mcp["time"].tools == [] and c.mcp["docs"].url
    assert c.model.prompt_style == "tools" and c.agent.skills_dir == "skills"


@pytest.mark.parametrize(
    ("table", "key", "words"),
    [
        ({"x": {}}, "mcp.x", "exactly one of command"),
        ({"x": {"command": ["a"], "url": "http://h/mcp"}}, "mcp.x", "exactly one of command"),
        ({"x": {"url": "ftp://h/mcp"}}, "mcp.x.url", "http:// or https://"),
        ({"x": {"command": ["a"], "headers": {"A": "b"}}}, "mcp.x", "headers are for an HTTP server"),
        ({"a__b": {"command": ["a"]}}, "mcp", "without '__'"),
        ({"x": {"command": ["a"], "timeout": 0}}, "mcp.x.timeout", "greater than 0"),
        ({"x": {"command": ["a"], "nope": 1}}, "mcp.x.nope", "unknown key"),
    ],
)
def test_a_wrong_mcp_table_is_named(table, key, words) -> None:
    with pytest.raises(ConfigError) as e:
        config_from_dict({"mcp": table})
    assert key in str(e.value) and words in str(e.value)


def test_a_header_from_the_environment_is_never_quoted(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("DOCS_TOKEN", "s3cr3t-token-value")
    path = tmp_path / "config.toml"
    path.write_text(
        '[mcp.docs]\nurl = "https://h/mcp"\ncommand = ["x"]\nheaders = { Authorization = "Bearer ${DOCS_TOKEN}" }\n'
    )
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert "s3cr3t" not in str(e.value)
