"""Every code block a reader of README.md or the docs site is told to use, checked against the code.

- ``toml``: validated as ``config.toml`` is (the core's sections by ``config_from_dict``, each
  ``[extensions.NAME]`` table by that extension's settings model), with every ``${VAR}`` set;
- ``python``: compiles (the examples that are whole programs are also run: the platform in
  tests/platform/test_readme_extension.py, the README's quick starts beside each platform);
- ``sh``: each command exists: ``make TARGET`` is in the Makefile, ``hub ...`` parses with the
  real command line, a script or folder named is in the repository; a command of another
  program must be one a reader can have (``KNOWN_PROGRAMS``).

A block that includes a file of the repository (``--8<-- "examples/weather/config.toml"``,
pymdownx.snippets, as the examples' pages do) is checked with that file in its place, so the
included files are checked as the page shows them.

A block that is not meant to be used as it stands (an error shown, a template) is marked with
``<!-- docs-test: skip REASON -->`` on the line before it; the reason is required.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hub.cli._main import _parser
from hub.config import config_from_dict, loads_toml
from hub.definitions import ENTRY_POINT_GROUP, import_extension
from hub.definitions._loader import RESERVED_KEYS, settings_model
from hub.personas import parse_persona

ROOT = Path(__file__).resolve().parents[2]
SKIP = re.compile(r"<!-- docs-test: skip (\S.*?) -->\s*$")
PERSONA_FILE = re.compile(r"#\s*contexts/([\w.-]+\.toml)\s*\n")
FENCE = re.compile(r"^(\s*)```(\w*)[^\n]*$")
SNIPPET = re.compile(r'^--8<-- "([^"]+)"$', re.M)

# programs a reader runs that are not the hub's: what they do is theirs to document
KNOWN_PROGRAMS = frozenset(
    {
        "export",
        "mkdir",
        "cp",
        "echo",
        "curl",
        "docker",
        "openssl",
        "pip",
        "python3",
        "sqlite3",
        "pg_dump",
        "psql",
        "chroma",
        "npm",
        "py-spy",
        "hadolint",
        "sudo",
        "cd",
        "git",
        "tail",
        "kill",
        "redis-server",
        "apt-get",
        "ollama",
        "systemctl",
        "printf",
        "sed",
    }
)


@dataclass
class Block:
    path: Path
    line: int
    lang: str
    text: str
    skip: str | None

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def doc_files() -> list[Path]:
    readmes = [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted(ROOT.glob("extensions/*/README.md"))]
    return [*readmes, *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of one Markdown file, with the skip mark on the line before each."""
    out: list[Block] = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang = m.group(1), m.group(2)
        prev = lines[i - 1] if i else ""
        skip = SKIP.search(prev)
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        body = "\n".join(line.removeprefix(indent) for line in lines[i + 1 : j])
        body = SNIPPET.sub(lambda m: included(path, m.group(1)), body)
        out.append(Block(path, i + 1, lang, body, skip.group(1) if skip else None))
        i = j + 1
    return out


def included(page: Path, name: str) -> str:
    """The text of a file a block includes (a path from the repository's root, as mkdocs.yml's
    snippets ``base_path`` says)."""
    target = ROOT / name
    assert target.is_file(), f"{page.relative_to(ROOT)} includes {name}, which is not a file"
    return target.read_text().rstrip("\n")


def all_blocks(lang: str | tuple[str, ...]) -> list[Block]:
    langs = (lang,) if isinstance(lang, str) else lang
    return [b for p in doc_files() for b in blocks(p) if b.lang in langs and b.skip is None]


# tokens whose shape their platform's settings check (Slack's carry their kind as a prefix)
TOKEN_SHAPES = {"SLACK_BOT_TOKEN": "xoxb-", "SLACK_APP_TOKEN": "xapp-"}
# variables whose whole value has a shape (an id of digits)
VALUES = {"WHATSAPP_PHONE_NUMBER_ID": "106540352242922", "SIGNAL_NUMBER": "+15550001111"}


class AnyEnv(dict[str, str]):
    """An environment where every variable is set (to a value long enough for a secret, and
    its own: two accounts' tokens must differ)."""

    def get(self, key: str, default: Any = None) -> str:  # type: ignore[override]
        return super().get(key, VALUES.get(key) or TOKEN_SHAPES.get(key, "") + key.lower() + "x" * 32)


def extension_settings() -> dict[str, Any]:
    """Each installed extension's settings model, by entry-point name."""

    models = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        factory = getattr(import_extension(ep.name), "extension", None)
        if callable(factory) and (model := settings_model(factory)) is not None:
            models[ep.name] = model
    return models


def test_the_blocks_are_found() -> None:
    """The collector sees the examples (a broken fence pattern would make every test vacuous)."""
    assert len(all_blocks("toml")) >= 20
    assert len(all_blocks("python")) >= 5
    assert len(all_blocks("sh")) >= 15


@pytest.mark.parametrize("block", all_blocks("toml"), ids=str)
def test_a_toml_block_is_a_valid_config(block: Block, tmp_path: Path) -> None:
    persona = PERSONA_FILE.match(block.text)
    if persona:  # a persona file, as the hub reads one from contexts/
        parse_persona(block.text, tmp_path / persona.group(1))
        return
    raw = loads_toml(block.text.encode(), path=str(block))
    cfg = config_from_dict(raw, path=tmp_path / "config.toml", env=AnyEnv())
    models = extension_settings()
    for name, table in cfg.extensions.items():
        settings = {k: v for k, v in table.items() if k not in RESERVED_KEYS}
        if name in models and "module" not in table:
            models[name].model_validate(settings)


@pytest.mark.parametrize("block", all_blocks("python"), ids=str)
def test_a_python_block_compiles(block: Block) -> None:
    # a snippet may await, as in the body of an async handler or test
    compile(block.text, str(block), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def _commands(text: str) -> list[list[str]]:
    """The commands of a shell block: comments dropped, continuations joined, split at ; && |."""
    joined = re.sub(r"\\\n\s*", " ", text)
    out = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        cmd: list[str] = []
        for w in [*words, ";"]:
            if w in (";", "&&", "||", "|"):
                if cmd:
                    out.append(cmd)
                cmd = []
            else:
                cmd.append(w)
    return out


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([a-z][\w-]*):", text, re.M))


def check_command(cmd: list[str]) -> None:
    """Fails (with what is wrong) for a command the repository does not have."""
    while cmd and (m := re.fullmatch(r"[A-Za-z_]\w*=(\$\()?(.*)", cmd[0])):
        # VAR=value before a command; VAR=$(command ...): the command
        cmd = [m.group(2), *cmd[1:]] if m.group(1) else cmd[1:]
    if not cmd:
        return
    program, args = cmd[0], cmd[1:]
    if program == "docker" and args[:1] == ["exec"]:
        rest = args[2:]
        if rest[:1] == ["hub"]:
            return check_command(rest)
        return
    if program in ("hub", ".venv/bin/hub", "$(BIN)/hub"):
        try:
            _parser().parse_args(args)
        except SystemExit as e:
            raise AssertionError(f"`hub {' '.join(args)}` is not a command the hub takes") from e
        return
    if program == "make":
        missing = [t for t in args if not t.startswith("-") and t not in _make_targets()]
        assert not missing, f"`make {' '.join(args)}`: no target {missing} in the Makefile"
        return
    if program in (".venv/bin/python", "python", "python3") and args and args[0].endswith(".py"):
        assert (ROOT / args[0]).is_file(), f"`{program} {args[0]}`: no such script"
        return
    if program in (".venv/bin/pip", "pip") and args[:1] == ["install"]:
        for arg in args[1:]:
            if arg.startswith(("extensions/", ".")) and not arg.startswith(".["):
                assert (ROOT / arg).exists(), f"`pip install {arg}`: no such path"
        return
    if program.startswith(".venv/bin/"):
        assert program.removeprefix(".venv/bin/") in {"python", "pip", "mkdocs", "ruff", "mypy", "lint-imports"}
        return
    assert program in KNOWN_PROGRAMS, f"`{program}` is neither the hub's nor a program KNOWN_PROGRAMS names"


@pytest.mark.parametrize("block", all_blocks(("sh", "bash")), ids=str)
def test_a_shell_block_names_real_commands(block: Block) -> None:
    for cmd in _commands(block.text):
        check_command(cmd)


def test_a_command_the_hub_lacks_fails_the_check() -> None:
    """The check is not vacuous: a renamed subcommand or flag is caught."""
    with pytest.raises(AssertionError, match="not a command the hub takes"):
        check_command(["hub", "runs", "--no-such-flag"])
    with pytest.raises(AssertionError, match="no target"):
        check_command(["make", "deploy-to-the-moon"])
    with pytest.raises(AssertionError, match="KNOWN_PROGRAMS"):
        check_command(["frobnicate"])


def test_a_skip_mark_gives_its_reason() -> None:
    for path in doc_files():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if "docs-test:" in line:
                assert SKIP.search(line), f"{path.relative_to(ROOT)}:{n}: a skip mark needs a reason"


def test_an_included_file_is_checked_in_place_of_its_line(tmp_path: Path) -> None:
    """A block that includes a file is that file's text; one that names no file fails."""
    page = ROOT / "docs" / "examples" / "weather.md"
    (config,) = [b for b in blocks(page) if b.lang == "toml" and "[extensions.weather]" in b.text]
    assert config.text == (ROOT / "examples" / "weather" / "config.toml").read_text().rstrip("\n")
    with pytest.raises(AssertionError, match="not a file"):
        included(page, "examples/no-such-example/config.toml")
