"""Config and personas: clear errors naming the file and the key; ${VAR} from the environment."""

import textwrap
from pathlib import Path

import pytest

from hub import ConfigError, Hub
from hub.config import load_config
from hub.definitions import load_extensions
from hub.personas import PersonaSet


def write(tmp_path: Path, text: str, name: str = "config.toml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_defaults_work_without_a_file(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = load_config()
    assert cfg.enabled_extensions() == {"cli": {}}
    assert cfg.model.resolved_provider() == "local"


def test_env_substitution_and_provider_choice(tmp_path) -> None:
    p = write(
        tmp_path,
        """
        [model]
        base_url = "${BASE}/v1"
        api_key = "${KEY}"
        [hub]
        data_dir = "${UNSET_VAR}state"
    """,
    )
    cfg = load_config(p, env={"BASE": "http://127.0.0.1:1", "KEY": "sk-1"})
    assert cfg.model.base_url == "http://127.0.0.1:1/v1" and cfg.model.api_key == "sk-1"
    assert cfg.model.resolved_provider() == "openai"
    assert cfg.data_dir == tmp_path / "state"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[model]\nnmae = 'x'\n", "config.toml: model.nmae: unknown key"),
        ("[agent]\nmax_steps = 'many'\n", "config.toml: agent.max_steps: Input should be a valid integer"),
        ("[agent]\nmax_steps = 0\n", "agent.max_steps: Input should be greater than or equal to 1"),
        ("[hub\n", "config.toml: not valid TOML"),
        ("[bogus]\n", "config.toml: bogus: unknown key"),
        ("[schedules.x]\ncontext = 'cli:session:a'\n", "schedules.x.input: required key is missing"),
    ],
)
def test_errors_name_the_file_and_key(tmp_path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, text))
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_missing_explicit_file(tmp_path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        load_config(tmp_path / "nope.toml")


def test_extension_settings_are_validated(tmp_path) -> None:
    cfg = load_config(write(tmp_path, "[extensions.cli]\nstdin = 'maybe'\n"))
    with pytest.raises(ConfigError, match=r"extensions\.cli\.stdin: Input should be a valid boolean"):
        load_extensions(cfg)
    cfg = load_config(write(tmp_path, "[extensions.cli]\ncolour = true\n"))
    with pytest.raises(ConfigError, match=r"extensions\.cli\.colour: unknown key"):
        load_extensions(cfg)


def test_unknown_extension_and_bad_module(tmp_path) -> None:
    from hub import ExtensionError

    cfg = load_config(write(tmp_path, "[extensions.nosuch]\n"))
    with pytest.raises(ExtensionError, match="'nosuch': no such extension"):
        load_extensions(cfg)
    cfg = load_config(write(tmp_path, "[extensions.tools]\nmodule = 'missing_tools'\n"))
    with pytest.raises(ConfigError, match="extensions.tools.module: module 'missing_tools' not found"):
        load_extensions(cfg)
    (tmp_path / "broken_tools.py").write_text("raise RuntimeError('typo in my tools')\n")
    cfg = load_config(write(tmp_path, "[extensions.tools]\nmodule = 'broken_tools.py'\n"))
    with pytest.raises(Exception, match="typo in my tools"):
        load_extensions(cfg)


def test_operator_module_by_path_and_disabled_tables(tmp_path) -> None:
    (tmp_path / "my_tools.py").write_text(
        textwrap.dedent("""
        from pydantic import BaseModel
        from hub import Extension, action

        class WeatherArgs(BaseModel):
            location: str

        @action(name="getWeather", description="Current weather for a location.")
        async def get_weather(args: WeatherArgs, ctx) -> dict:
            return {"temperature": 72}

        extension = Extension(name="weather", actions=[get_weather])
    """)
    )
    cfg = load_config(
        write(
            tmp_path,
            """
        [extensions.weather]
        module = "my_tools"
        [extensions.cli]
        enabled = false
    """,
        )
    )
    exts = load_extensions(cfg)
    assert [e.name for e in exts] == ["weather"]
    hub = Hub(cfg, model=object())  # type: ignore[arg-type]
    assert "getWeather" in hub.actions and "cli:session" not in hub.contexts


def test_persona_errors_and_live_edits(tmp_path, caplog) -> None:
    folder = tmp_path / "contexts"
    folder.mkdir()
    (folder / "default.toml").write_text('name = "Hub"\ninstructions = "Be kind."\n')
    (folder / "broken.toml").write_text('name = "B"\ninstructions = """unclosed\n')
    personas = PersonaSet(folder)
    errors = personas.load_all()
    assert len(errors) == 1 and "broken.toml: not valid TOML" in str(errors[0])
    assert personas.get("default").instructions == "Be kind."
    # an edit that does not validate keeps the previous version, and says why
    import os
    import time

    (folder / "default.toml").write_text('name = "Hub"\ninstructions = ""\n')
    os.utime(folder / "default.toml", ns=(time.time_ns(), time.time_ns() + 10**9))
    assert personas.get("default").instructions == "Be kind."
    assert "edit rejected, keeping the previous version" in caplog.text
    assert "default.toml: instructions: String should have at least 1 character" in caplog.text
    (folder / "default.toml").write_text('name = "Hub"\ninstructions = "Be brief."\n')
    os.utime(folder / "default.toml", ns=(time.time_ns(), time.time_ns() + 2 * 10**9))
    assert personas.get("default").instructions == "Be brief."


def test_an_installed_package_registers_an_extension_by_entry_point(tmp_path, monkeypatch) -> None:
    pkg = tmp_path / "site"
    (pkg / "acme_tools").mkdir(parents=True)
    (pkg / "acme_tools" / "__init__.py").write_text(
        textwrap.dedent("""
        from pydantic import BaseModel, ConfigDict
        from hub import Extension, action, NoArgs

        class Settings(BaseModel):
            model_config = ConfigDict(extra="forbid")
            greeting: str = "hello"

        def make(settings: Settings) -> Extension:
            @action(name="greet", schema=NoArgs)
            async def greet(args, ctx) -> str:
                return settings.greeting
            return Extension(name="acme", actions=[greet])
    """)
    )
    dist = pkg / "acme_tools-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-tools\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[hub.extensions]\nacme = acme_tools:make\n")
    monkeypatch.syspath_prepend(str(pkg))
    cfg = load_config(write(tmp_path, "[extensions.cli]\nenabled = false\n[extensions.acme]\ngreeting = 'hi'\n"))
    (ext,) = load_extensions(cfg)
    assert ext.name == "acme" and [a.name for a in ext.actions] == ["greet"]
    cfg = load_config(write(tmp_path, "[extensions.cli]\nenabled = false\n[extensions.acme]\ngreting = 'hi'\n"))
    with pytest.raises(ConfigError, match="extensions.acme.greting: unknown key"):
        load_extensions(cfg)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[model]\nfallbacks = ['bakup']\n[models.backup]\nname = 'b'\n",
            "config.toml: model: Value error, [model] fallbacks: unknown model 'bakup' "
            "(the [models.NAME] tables: backup)",
        ),
        (
            "[model]\nfallbacks = ['backup']\n",
            "[model] fallbacks: unknown model 'backup' (the [models.NAME] tables: none)",
        ),
        ("[models.a]\nfallbacks = ['a']\n", "[models.a] fallbacks: a model cannot fall back to itself"),
        ("[models.a]\nfallbacks = ['c']\n[models.b]\nname = 'x'\n", "[models.a] fallbacks: unknown model 'c'"),
        ("[models.model]\nname = 'x'\n", "[models.model]: a model's name is a letter"),
        ("[models.b]\nnmae = 'x'\n", "config.toml: models.b.nmae: unknown key"),
    ],
)
def test_named_models_and_their_fallbacks_are_checked(tmp_path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, text))
    assert message in str(e.value)


def test_a_named_model_takes_every_key_of_model_and_its_keys_stay_secret(tmp_path, monkeypatch) -> None:
    from hub.redact import Redactor

    monkeypatch.setenv("POOL_KEY_TWO", "sk-second-key-0002")
    text = (
        "[model]\nname = 'a'\napi_key = 'sk-first-key-00001'\napi_keys = ['${POOL_KEY_TWO}', 'sk-first-key-00001']\n"
        "fallbacks = ['backup']\n"
        "[models.backup]\nprovider = 'openai'\nname = 'b'\nbase_url = 'http://127.0.0.1:9/v1'\n"
        "api_keys = ['sk-backup-key-0003']\ntimeout = 5\nprice_input = 1.5\ncircuit_cooldown = 30\n"
    )
    cfg = load_config(write(tmp_path, text))
    assert cfg.model.keys == ["sk-first-key-00001", "sk-second-key-0002"]  # api_key first, each once
    backup = cfg.model_section("backup")
    assert (backup.timeout, backup.price_input, backup.circuit_cooldown) == (5, 1.5, 30)
    assert cfg.model_section("model") is cfg.model
    masked = Redactor.from_config(cfg, env={}).redact("sk-first-key-00001 sk-second-key-0002 sk-backup-key-0003")
    assert "sk-" not in masked
    # a wrong type in a key pool is named, and the value never shown
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, "[model]\napi_keys = 'sk-not-a-list-0004'\n"))
    assert "model.api_keys" in str(e.value) and "sk-not-a-list-0004" not in str(e.value)


def test_hub_check_shows_the_fallbacks_and_the_key_pool(tmp_path, capsys) -> None:
    from hub.cli import main

    path = write(
        tmp_path,
        "[model]\nprovider = 'openai'\nname = 'a'\napi_keys = ['sk-check-key-0001', 'sk-check-key-0002']\n"
        "fallbacks = ['backup']\n[models.backup]\nprovider = 'openai'\nname = 'b'\napi_key = 'sk-check-key-0003'\n"
        "[memory]\nepisodes = false\n",
    )
    (tmp_path / "contexts").mkdir()
    assert main(["check", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "fallback backup: openai b, 1 key(s)" in out and "keys: 2, used in turn" in out
    assert "sk-check" not in out
