"""The command-line reference, generated from the argument parser that ``hub`` itself uses.

An mkdocs hook (``hooks:`` in mkdocs.yml): on ``operating/cli.md`` it replaces the marker
``<!-- cli-reference -->`` with one table per command (``hub runs``, ``hub memory forget``,
...), every positional argument and option with its value, default and help, walked from
``hub.cli._main._parser()``. An option added to the parser appears at the next build, so the
page cannot drift from ``hub --help``. The options every command shares (``--config``,
``--log-level``, ``--log-format``, ``--help``) are found as those every command has alike,
and are listed once.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MARKER = "<!-- cli-reference -->"
PAGE = "operating/cli.md"
# each table in a block that docs/assets/stylesheets/extra.css lays out (md_in_html), as on the
# config reference
OPEN, CLOSE = '<div class="hub-reference" markdown>', "</div>"

_TYPES: dict[Any, str] = {int: "integer", float: "number", Path: "path", str: "text"}


def commands(parser: argparse.ArgumentParser, prefix: str = "hub") -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """``(command, help, parser)`` for every command that runs something (``hub memory forget``,
    not ``hub memory``), depth first, in the parser's order."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield prefix, "", parser
        return
    for sub in subs:
        helps = {choice.dest: choice.help or "" for choice in sub._choices_actions}
        for name, child in sub.choices.items():
            for command, text, leaf in commands(child, f"{prefix} {name}"):
                yield command, text or helps.get(name, ""), leaf


def arguments(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The parser's positionals and options, as ``hub CMD --help`` lists them."""
    return [a for a in parser._actions if not isinstance(a, argparse._SubParsersAction)]


def _signature(action: argparse.Action) -> tuple[Any, ...]:
    choices = tuple(action.choices) if action.choices is not None else None
    return (tuple(action.option_strings), action.dest, action.help, repr(action.default), choices)


def common_options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The options that every command has, alike (the ``common`` parent parser, and ``--help``)."""
    leaves = [leaf for _, _, leaf in commands(parser)]
    shared = {_signature(a) for a in arguments(leaves[0]) if a.option_strings}
    for leaf in leaves[1:]:
        shared &= {_signature(a) for a in arguments(leaf)}
    return [a for a in arguments(leaves[0]) if _signature(a) in shared]


def invocation(action: argparse.Action) -> str:
    """``--max-age MAX_AGE``, ``-h, --help``, ``RUN_ID``: how the argument is written."""
    metavar = action.metavar or action.dest.upper()
    if isinstance(metavar, tuple):
        metavar = " ".join(metavar)
    if not action.option_strings:
        return str(metavar)
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    return ", ".join(f"{opt} {metavar}" for opt in action.option_strings)


def _value(action: argparse.Action) -> str:
    if action.nargs == 0:
        return "flag"
    if action.choices is not None:
        return "one of " + ", ".join(f"`{c}`" for c in action.choices)
    kind = _TYPES.get(action.type or str, getattr(action.type, "__name__", "text"))
    if action.nargs == "?":
        kind += ", optional"
    return kind


def _default(action: argparse.Action) -> str:
    if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
        return "–"
    if action.required:
        return "**required**"
    if action.nargs == 0:
        return "on" if action.default else "off"
    if action.default is None:
        return "unset"
    return f"`{action.default}`"


def _cell(text: str | None) -> str:
    return " ".join((text or "").split()).replace("|", "\\|")


def table(actions: list[argparse.Action]) -> list[str]:
    rows = [OPEN, "", "| argument | type | default | meaning |", "|---|---|---|---|"]
    for action in actions:
        text = action.help if action.help != argparse.SUPPRESS else ""
        text = (text or "").replace("%(default)s", str(action.default)).replace("%(prog)s", "hub")
        if isinstance(action, argparse._VersionAction):
            text = f"{text or 'print the version'}: `{action.version}`".replace("%(prog)s", "hub")
        rows.append(f"| `{invocation(action)}` | {_value(action)} | {_default(action)} | {_cell(text)} |")
    return [*rows, "", CLOSE]


def _exclusive(parser: argparse.ArgumentParser) -> list[str]:
    lines = []
    for group in parser._mutually_exclusive_groups:
        names = ", ".join(f"`{a.option_strings[0]}`" for a in group._group_actions)
        lines.append(f"{'Exactly' if group.required else 'At most'} one of {names}.")
    return lines


def cli_reference(parser: argparse.ArgumentParser | None = None) -> str:
    """The whole reference: ``hub`` itself, the shared options, then each command."""
    if parser is None:
        from hub.cli._main import _parser

        parser = _parser()
    common = common_options(parser)
    shared = {_signature(a) for a in common}
    parts = [
        "### `hub`",
        "",
        _cell(parser.description),
        "",
        *table(arguments(parser)),
        "",
        "### Options of every command",
        "",
        "Every command below takes these as well as its own:",
        "",
        *table(common),
        "",
    ]
    for command, text, leaf in commands(parser):
        own = [a for a in arguments(leaf) if _signature(a) not in shared]
        parts += [f"### `{command}`", ""]
        if text:
            parts += [_cell(text)[:1].upper() + _cell(text)[1:] + ".", ""]
        parts += [*table(own), ""] if own else ["No arguments besides the options of every command.", ""]
        if exclusive := _exclusive(leaf):
            parts += [" ".join(exclusive), ""]
    return "\n".join(parts)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if page.file.src_uri == PAGE:
        if MARKER not in markdown:
            raise ValueError(f"{PAGE} has lost its marker {MARKER}")
        return markdown.replace(MARKER, cli_reference())
    return markdown
