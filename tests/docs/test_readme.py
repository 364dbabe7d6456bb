"""README.md is the front door: short, opening with the two commands, its links all landing.

The before-stop hook and .ci/run rely on the README's test command being ``make test``."""

from __future__ import annotations

import re
import tomllib

from tests.docs.test_code_blocks import ROOT, blocks

README = ROOT / "README.md"
# 16,500 since the Slack and Matrix quick starts: one per platform (tests/docs/test_platforms.py)
MAX_BYTES = 16_500


def test_the_readme_opens_with_the_two_commands() -> None:
    first = blocks(README)[0]
    commands = [line for line in first.text.splitlines() if not line.startswith("#")]
    assert first.lang == "sh" and commands == ["make chat", "make test"]
    assert first.line < 10, "the commands come first, before any prose but the one-line summary"


def test_the_readme_stays_short() -> None:
    size = len(README.read_bytes())
    assert size <= MAX_BYTES, f"README.md is {size:,} bytes: move the detail to a page under docs/"


def test_every_relative_link_of_the_readme_lands() -> None:
    text = README.read_text()
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link]
    assert local, "the README links into the docs"
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_each_extension_distribution_has_its_own_readme() -> None:
    """What a package index shows for hub-NAME is extensions/NAME/README.md."""
    projects = sorted(ROOT.glob("extensions/*/pyproject.toml"))
    assert projects
    for project in projects:
        meta = tomllib.loads(project.read_text())["project"]
        assert meta.get("readme") == "README.md", f"{project.relative_to(ROOT)}: readme is not README.md"
        text = (project.parent / "README.md").read_text()
        assert text.startswith(f"# {meta['name']}\n"), f"{project.parent.name}/README.md: title is not {meta['name']}"
