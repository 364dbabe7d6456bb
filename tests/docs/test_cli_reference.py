"""The command-line reference on operating/cli.md is generated from ``hub``'s argument parser
(docs/hooks/cli_reference.py): every argument of every command is on it, with its meaning, and
an option added to the parser appears."""

from __future__ import annotations

import argparse
import importlib.util
import re
from collections.abc import Iterator
from types import ModuleType

from hub.cli._main import _parser
from tests.docs.test_code_blocks import ROOT

COMMON = "Options of every command"


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cli_reference", ROOT / "docs" / "hooks" / "cli_reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def walk(parser: argparse.ArgumentParser, prefix: str = "hub") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every parser in the tree, ``hub`` and its groups (``hub memory``) included, by command."""
    yield prefix, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from walk(child, f"{prefix} {name}")


def names(action: argparse.Action) -> set[str]:
    """How the page names an argument: its option strings, or a positional's metavar."""
    return set(action.option_strings) if action.option_strings else {(action.metavar or action.dest.upper())}


def sections(text: str) -> dict[str, dict[str, str]]:
    """``{"hub runs": {"--limit": "meaning", ...}, "Options of every command": {...}}`` from the page."""
    out: dict[str, dict[str, str]] = {}
    section = ""
    for line in text.splitlines():
        if m := re.match(r"### `?([^`]+)`?$", line):
            section = m.group(1)
            out[section] = {}
        elif section and (m := re.match(r"\| `([^`]+)` \|.*\| (.*) \|$", line)):
            for name in re.findall(r"--?[\w-]+|^[A-Z_:]+", m.group(1)):
                out[section][name] = m.group(2).strip()
    return out


def test_every_argument_of_every_command_is_on_the_page_with_a_meaning() -> None:
    found = sections(generator().cli_reference())
    common = found.pop(COMMON)
    parser = _parser()
    leaves = {
        cmd: p for cmd, p in walk(parser) if not any(isinstance(a, argparse._SubParsersAction) for a in p._actions)
    }
    assert {"hub run", "hub health", "hub export-training", "hub memory forget", "hub skill rollback"} <= set(leaves)
    for command, leaf in [("hub", parser), *leaves.items()]:
        assert command in found, f"{command} has no section on the page"
        for action in leaf._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            for name in names(action):
                meaning = found[command].get(name, common.get(name) if command != "hub" else None)
                assert meaning is not None, f"{command} {name} is not on the page"
                assert meaning, f"{command} {name} has no help= in the parser"
    # what the page calls common, every command takes
    for command, leaf in leaves.items():
        taken = set().union(*(names(a) for a in leaf._actions))
        assert set(common) <= taken, (
            f"{command} lacks {set(common) - taken}, yet the page says every command takes them"
        )
    # the extra sections name no command the parser lacks
    assert set(found) == {"hub", *leaves}


def test_the_options_the_issue_named_are_there() -> None:
    found = sections(generator().cli_reference())
    assert {"--config", "--log-level", "--log-format", "-h"} <= set(found[COMMON])
    assert "--version" in found["hub"]
    assert "--max-age" in found["hub health"]
    assert {"--context", "--meta", "--all-states", "--out"} <= set(found["hub export-training"])
    assert {"--platform", "--person", "--user", "--context"} <= set(found["hub memory forget"])
    with_json = [cmd for cmd, rows in found.items() if "--json" in rows]
    assert {"hub runs", "hub trace", "hub approvals", "hub review", "hub mcp list"} <= set(with_json)


def test_an_option_added_to_the_parser_appears_with_its_default() -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", metavar="FILE", help="config file")
    parser = argparse.ArgumentParser(prog="hub", description="A hub.")
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("one", parents=[common], help="does one thing")
    one.add_argument("--brand-new", type=int, default=7, metavar="N", help="an option the page has never seen")
    two = sub.add_parser("two", parents=[common], help="does another")
    two.add_argument("target", choices=["a", "b"], help="which")
    text = generator().cli_reference(parser)
    assert "| `--brand-new N` | integer | `7` | an option the page has never seen |" in text
    assert "| `TARGET` | one of `a`, `b` | **required** | which |" in text
    found = sections(text)
    assert set(found[COMMON]) == {"-h", "--help", "--config"}
    assert "--config" not in found["hub one"]  # listed once, with the options of every command


def test_exclusive_options_are_said_so() -> None:
    text = generator().cli_reference()
    forget = text.split("### `hub memory forget`")[1].split("### ")[0]
    assert "Exactly one of `--user`, `--context`, `--person`." in forget


def test_the_page_keeps_its_marker() -> None:
    gen = generator()
    assert gen.MARKER in (ROOT / "docs" / gen.PAGE).read_text()
