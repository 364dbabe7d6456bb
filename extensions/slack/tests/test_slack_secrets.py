"""A signing secret of spaces is refused: stripped, it would silently mean Socket Mode."""

from __future__ import annotations

import pytest

from hub.config import config_from_dict
from hub.definitions import load_extension
from hub.errors import ConfigError


@pytest.mark.parametrize("secret", [" " * 32, "\t \t" * 8])
def test_a_blank_signing_secret_is_refused(secret: str) -> None:
    cfg = config_from_dict({}, env={})
    with pytest.raises(ConfigError, match=r"signing_secret.*blank|blank.*signing"):
        load_extension("slack", {"bot_token": "xoxb-1", "app_token": "xapp-1", "signing_secret": secret}, cfg)


def test_an_empty_signing_secret_is_socket_mode() -> None:
    cfg = config_from_dict({}, env={})
    ext = load_extension("slack", {"bot_token": "xoxb-1", "app_token": "xapp-1", "signing_secret": ""}, cfg)
    assert not ext.routes
