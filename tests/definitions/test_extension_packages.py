"""The platforms are packages of their own, found like third-party ones; the core names none."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from hub import ExtensionError
from hub.cli import main
from hub.definitions import ENTRY_POINT_GROUP, import_extension

ROOT = Path(__file__).resolve().parents[2]
BUILT_IN = ("cli", "telegram", "discord", "twitter", "matrix", "slack")


@pytest.mark.parametrize("name", BUILT_IN)
def test_each_platform_is_a_distribution_registered_by_entry_point(name: str) -> None:
    meta = tomllib.loads((ROOT / "extensions" / name / "pyproject.toml").read_text())
    assert meta["project"]["name"] == f"hub-{name}"
    assert meta["project"]["entry-points"][ENTRY_POINT_GROUP] == {name: f"hub_{name}"}
    assert (ROOT / "extensions" / name / f"hub_{name}" / "py.typed").is_file()
    assert (ROOT / "extensions" / name / "tests").is_dir()
    (ep,) = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP, name=name)
    module = import_extension(name)
    assert module.__name__ == ep.value == f"hub_{name}" and hasattr(module, "extension")


def test_the_core_wheel_ships_hub_only_with_extras_naming_the_distributions() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["tool"]["setuptools"]["packages"]["find"]["include"] == ["hub", "hub.*"]
    assert "py.typed" in meta["tool"]["setuptools"]["package-data"]["hub"]
    extras = meta["project"]["optional-dependencies"]
    for name in BUILT_IN:
        assert [r.split(">")[0] for r in extras[name]] == [f"hub-{name}"]
    testpaths = meta["tool"]["pytest"]["ini_options"]["testpaths"]
    assert all(f"extensions/{n}/tests" in testpaths for n in BUILT_IN)
    assert not (ROOT / "extensions" / "__init__.py").exists()


def test_an_extension_no_package_registers_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.metadata.entry_points
    monkeypatch.setattr(
        importlib.metadata,
        "entry_points",
        lambda **kw: [] if kw.get("name") == "telegram" else real(**kw),
    )
    with pytest.raises(ExtensionError, match=r"'telegram': no such extension.*pip install 'hub\[telegram\]'"):
        import_extension("telegram")
    with pytest.raises(ExtensionError, match="no such extension") as caught:
        import_extension("nosuch")
    assert "pip install" not in str(caught.value)  # no extra to suggest for an unknown name


def test_hub_chat_without_the_cli_extension_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    real = importlib.metadata.entry_points
    monkeypatch.setattr(
        importlib.metadata,
        "entry_points",
        lambda **kw: [] if kw.get("name") == "cli" else real(**kw),
    )
    (tmp_path / "config.toml").write_text('[hub]\ndata_dir = "data"\n[model]\nprovider = "openai"\napi_key = "x"\n')
    code = main(["chat", "--config", str(tmp_path / "config.toml")])
    err = capsys.readouterr().err
    assert code != 0 and "pip install 'hub[cli]'" in err, err


def test_import_contracts_hold() -> None:
    """The core imports no extension; extensions are independent and use the public API only."""
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "0 broken" in done.stdout, done.stdout[-3000:]


def test_loader_logging_and_cli_name_no_platform_in_code() -> None:
    """Docstrings may give examples; code (strings and names outside them) names no platform."""
    import ast

    for rel in ("hub/definitions/_loader.py", "hub/logging_setup.py", "hub/cli/_main.py"):
        source = (ROOT / rel).read_text()
        assert 'import_module(f"extensions.' not in source and "from extensions" not in source, rel
        tree = ast.parse(source)
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                for name in ("telegram", "discord", "twitter", "tweepy", "slack"):
                    assert name not in node.value, f"{rel}:{node.lineno} names {name!r}: {node.value!r}"
