"""Config mistakes and hostile files, through the entry points an operator uses: config files,
``contexts/`` and the ``hub`` command (as a real process)."""

from __future__ import annotations

import asyncio
import os
import signal
import textwrap
from pathlib import Path

import pytest

from hub.config import MAX_FILE_BYTES, config_from_dict, load_config
from hub.errors import ConfigError
from hub.personas import PersonaSet
from tests._support.processes import REPO, hub_cmd, spawn_hub

MODEL = '[model]\nprovider = "openai"\nname = "m"\nbase_url = "http://127.0.0.1:9/v1"\napi_key = "k"\n'


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "contexts").mkdir(exist_ok=True)
    (tmp_path / "contexts" / "default.toml").write_text('name = "Wendy"\ninstructions = "Be brief."\n')
    cfg = tmp_path / "config.toml"
    cfg.write_text(textwrap.dedent(text))
    return cfg


# --- ${VAR} ---------------------------------------------------------------------------------


def test_compose_forms_defaults_and_required_variables() -> None:
    raw = {"model": {"name": "${M:-fallback}", "base_url": "${U-}", "api_key": "${K:?set K to your API key}"}}
    cfg = config_from_dict(raw, env={"K": "sk-1", "U": ""})
    assert (cfg.model.name, cfg.model.base_url, cfg.model.api_key) == ("fallback", "", "sk-1")
    assert config_from_dict(raw, env={"K": "sk-1", "M": ""}).model.name == "fallback"  # :- also covers empty
    assert config_from_dict({"model": {"name": "${M-x}"}}, env={"M": ""}).model.name == ""  # - only unset
    with pytest.raises(ConfigError, match=r"model\.api_key: \$\{K\} is not set: set K to your API key"):
        config_from_dict(raw, env={})
    with pytest.raises(ConfigError, match=r"\$\{K\} is empty: set K"):
        config_from_dict(raw, env={"K": ""})


def test_an_unset_variable_is_named_and_an_error_where_the_key_needs_a_value() -> None:
    cfg = config_from_dict({"model": {"api_key": "${OPENAI_KEY_X}"}, "http": {"token": "${HUB_TOKEN_X}"}}, env={})
    assert cfg.unset == [("model.api_key", "OPENAI_KEY_X"), ("http.token", "HUB_TOKEN_X")]
    assert "model.api_key: ${OPENAI_KEY_X} is not set" in cfg.unset_warnings()[0]
    for raw, key in [
        ({"model": {"name": "${MODEL_X}"}}, "model.name"),
        ({"hub": {"data_dir": "${DATA_X}"}}, "hub.data_dir"),
        ({"model": {"model_path": "${GGUF_X}"}}, "model.model_path"),
        ({"extensions": {"telegram": {"token": "${TG_X}"}}}, "extensions.telegram.token"),
    ]:
        with pytest.raises(ConfigError, match=rf"{key}: \$\{{\w+_X\}} is not set, and this key needs a value"):
            config_from_dict(raw, env={})
    # a disabled platform's token is not in effect: no error, no warning
    off = config_from_dict({"extensions": {"telegram": {"enabled": False, "token": "${TG_X}"}}}, env={})
    assert off.unset == []


def test_the_shipped_config_starts_with_no_variable_set_and_no_warning() -> None:
    cfg = load_config(REPO / "config.toml", env={})
    assert cfg.unset == []
    assert cfg.model.resolved_provider() == "local"


def test_secrets_are_never_echoed_in_errors() -> None:
    with pytest.raises(ConfigError) as e:
        config_from_dict({"http": {"port": "${SECRET_X}"}}, env={"SECRET_X": "s3cr3t-value"})
    assert "http.port" in str(e.value) and "s3cr3t" not in str(e.value) and "not shown" in str(e.value)
    with pytest.raises(ConfigError) as e:  # written in the file, in a key of the wrong type
        config_from_dict({"http": {"token": ["hunter2-hunter2"]}})
    assert "http.token" in str(e.value) and "hunter2" not in str(e.value)
    with pytest.raises(ConfigError) as e:
        config_from_dict({"webhooks": {"w": {"context": "a:b:1", "secret": "short-one"}}})
    assert "at least 16" in str(e.value) and "short-one" not in str(e.value)
    with pytest.raises(ConfigError) as e:
        config_from_dict({"http": {"port": "not-a-secret"}})  # plain values are still quoted
    assert "'not-a-secret'" in str(e.value)


# --- files --------------------------------------------------------------------------------


async def one_line_error(tmp_path: Path, *args: str) -> str:
    code, out, err = await hub_cmd(*args, cwd=tmp_path)
    assert code == 2, (out, err)
    assert err.strip() and "\n" not in err.strip() and "Traceback" not in err, err
    return err


async def test_a_config_larger_than_1_mb_is_refused_in_one_line(tmp_path: Path) -> None:
    cfg = write(tmp_path, MODEL)
    cfg.write_text(cfg.read_text() + "# " + "x" * MAX_FILE_BYTES + "\n")
    err = await one_line_error(tmp_path, "check")
    assert "config.toml: is 1,000,0" in err and "more than the 1,000,000 allowed" in err


@pytest.mark.parametrize("bomb", ["a = " + "[" * 100_000, "a = " + "[" * 40 + "]" * 40, "a = " + "{b = " * 5000])
async def test_a_toml_bomb_is_refused_in_one_line(tmp_path: Path, bomb: str) -> None:
    write(tmp_path, MODEL + bomb + "\n")
    err = await one_line_error(tmp_path, "check")
    assert "nested too deeply" in err or "not valid TOML" in err


async def test_a_data_dir_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    write(tmp_path, MODEL + '[hub]\ndata_dir = "afile/data"\n')
    err = await one_line_error(tmp_path, "run")
    assert "hub.data_dir" in err and "is not a folder" in err
    write(tmp_path, MODEL + '[hub]\ndata_dir = "afile"\n')
    assert "is not a folder" in await one_line_error(tmp_path, "chat")


async def test_check_warns_of_unset_variables(tmp_path: Path) -> None:
    write(tmp_path, MODEL.replace('api_key = "k"', 'api_key = "${NOT_SET_ANYWHERE}"') + "[extensions.cli]\n")
    code, out, err = await hub_cmd("check", cwd=tmp_path)
    assert code == 0, err
    assert "warning:" in err and "model.api_key: ${NOT_SET_ANYWHERE} is not set" in err


# --- contexts/ ----------------------------------------------------------------------------


def test_only_regular_files_inside_the_folder_are_read(tmp_path: Path) -> None:
    folder = tmp_path / "contexts"
    folder.mkdir()
    (folder / "default.toml").write_text('instructions = "inside"\n')
    outside = tmp_path / "secret.toml"
    outside.write_text('instructions = "read from outside the folder"\n')
    (folder / "leak.toml").symlink_to(outside)
    (folder / "alias.toml").symlink_to(folder / "default.toml")  # inside: fine
    os.mkfifo(folder / "pipe.toml")
    personas = PersonaSet(folder)
    assert personas.load_all() == []
    assert personas.names() == ["alias", "default"]
    skipped = {p.name: why for p, why in personas.skipped().items()}
    assert "outside" in skipped["leak.toml"] and "not a regular file" in skipped["pipe.toml"]


async def test_check_and_run_do_not_block_on_a_fifo(tmp_path: Path) -> None:
    write(tmp_path, MODEL + "[extensions.cli]\nstdin = false\n[hub]\nshutdown_grace = 0\n")
    os.mkfifo(tmp_path / "contexts" / "pipe.toml")
    (tmp_path / "contexts" / "leak.toml").symlink_to("/etc/hostname")
    code, out, err = await hub_cmd("check", cwd=tmp_path)
    assert code == 0, err
    assert "pipe.toml: skipped: not a regular file" in err and "leak.toml: skipped: a symlink leading outside" in err
    proc = await spawn_hub("run", cwd=tmp_path, stdin=asyncio.subprocess.DEVNULL)
    try:
        lines = []
        while not any("hub running" in ln for ln in lines):
            line = await asyncio.wait_for(proc.stderr.readline(), 30)
            assert line, "".join(lines)
            lines.append(line.decode())
        assert any("pipe.toml: skipped" in ln for ln in lines)
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
