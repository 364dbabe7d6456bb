"""``hub check`` on ``[[routes]]`` and on accounts: each problem named where it is."""

from __future__ import annotations

from pathlib import Path

from hub.cli._check import check_config
from hub.config import config_from_dict


def _config(tmp_path: Path, **tables: object) -> object:
    contexts = tmp_path / "contexts"
    contexts.mkdir(exist_ok=True)
    (contexts / "default.toml").write_text('name = "default"\ninstructions = "Hi."\n')
    (contexts / "sales.toml").write_text('name = "sales"\ninstructions = "Sell."\ncontexts = ["telegram:chat:-100*"]\n')
    (contexts / "support.toml").write_text('name = "support"\ninstructions = "Help."\n')
    return config_from_dict({"hub": {"data_dir": str(tmp_path / "data"), "contexts_dir": str(contexts)}, **tables})


TELEGRAM = {
    "telegram": {
        "token": "111:main",
        "accounts": {"support": {"token": "222:support"}},
    }
}


def test_a_persona_declaration_that_a_route_overrides_is_named(tmp_path: Path) -> None:
    cfg = _config(tmp_path, extensions=TELEGRAM, routes=[{"match": "telegram:chat:-1001*", "persona": "support"}])
    report = check_config(cfg)  # type: ignore[arg-type]
    assert report.ok, report.errors
    (warning,) = [w for w in report.warnings if "routes #1" in w]
    assert "sales.toml: contexts: 'telegram:chat:-100*' overlaps routes #1" in warning
    assert "gives persona 'support': the route wins there" in warning


def test_a_route_naming_a_missing_persona_is_an_error(tmp_path: Path) -> None:
    cfg = _config(tmp_path, extensions=TELEGRAM, routes=[{"match": "telegram:chat:support/*", "persona": "nobody"}])
    report = check_config(cfg)  # type: ignore[arg-type]
    assert any("routes #1 (match 'telegram:chat:support/*'): persona 'nobody' has no file" in e for e in report.errors)


def test_every_account_is_validated(tmp_path: Path) -> None:
    broken = {"telegram": {"token": "111:main", "accounts": {"support": {"token": "222:x", "groups": "some"}}}}
    report = check_config(_config(tmp_path, extensions=broken))  # type: ignore[arg-type]
    assert any("extensions.telegram.accounts.support.groups" in e for e in report.errors), report.errors
    report = check_config(_config(tmp_path, extensions=TELEGRAM))  # type: ignore[arg-type]
    assert report.ok and report.extensions == ["telegram"]


def test_no_default_persona_is_named_only_where_routes_leave_conversations_without_one(tmp_path: Path) -> None:
    cfg = _config(tmp_path, extensions=TELEGRAM, routes=[{"match": "telegram:*", "persona": "support"}])
    (tmp_path / "contexts" / "default.toml").unlink()
    assert not [w for w in check_config(cfg).warnings if "no default.toml" in w]  # type: ignore[arg-type]

    partial = _config(tmp_path, extensions=TELEGRAM, routes=[{"match": "telegram:chat:-100*", "persona": "support"}])
    (tmp_path / "contexts" / "default.toml").unlink()
    (warning,) = [w for w in check_config(partial).warnings if "no default.toml" in w]  # type: ignore[arg-type]
    assert "(telegram:chat)" in warning

    shadowed = _config(
        tmp_path,
        extensions=TELEGRAM,
        routes=[{"match": "telegram:chat:9*", "actions": ["ping"]}, {"match": "telegram:*", "persona": "support"}],
    )
    (tmp_path / "contexts" / "default.toml").unlink()
    assert [w for w in check_config(shadowed).warnings if "no default.toml" in w]  # type: ignore[arg-type]
