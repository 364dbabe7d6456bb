"""Every installed platform is named wherever the project lists its platforms, and has its page
and its quick start: the list is the installed extensions' (``hub.platforms`` entry points,
hub/definitions/_platforms.py), so a new platform that a list leaves out fails here.

The checks are functions of the repository's files, so the last tests run them on doctored
copies (a name taken out, a platform added) and see them fail.
"""

from __future__ import annotations

import contextlib
import io
import re
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

import hub
from hub.cli import main
from hub.definitions import ENTRY_POINT_GROUP, PLATFORM_GROUP, InstalledPlatform, installed_platforms

ROOT = Path(__file__).resolve().parents[2]

# The terminal's quick start is the README's first block, `make chat` (tests/docs/test_readme.py)
QUICK_START_ELSEWHERE = {"cli": "the README's first block, `make chat`"}

Texts = dict[str, str]


def section(text: str, start: str, end: str, where: str) -> str:
    """The text from the line matching ``start`` (a regex) to the next match of ``end``."""
    match = re.search(rf"({start}.*?)(?={end}|\Z)", text, re.S | re.M)
    assert match, f"{where}: no {start!r}"
    return match.group(1)


def places(root: Path) -> Texts:
    """Every list of the platforms: where it is, and its text."""
    readme = (root / "README.md").read_text()
    home = (root / "docs/index.md").read_text()
    mkdocs = (root / "mkdocs.yml").read_text()
    description = re.search(r"^site_description: (.+)$", mkdocs, re.M)
    assert description, "mkdocs.yml has no site_description"
    return {
        "README.md's opening (before its first ## heading)": readme.split("\n## ", 1)[0],
        "README.md's features (**Platforms**)": section(readme, r"^- \*\*Platforms\*\*", r"^- \*\*", "README.md"),
        "docs/index.md's text": home.split("```mermaid", 1)[0],
        "docs/index.md's diagram": section(home, r"^```mermaid", r"^```$", "docs/index.md"),
        "docs/index.md's 'Put it on a platform'": section(
            home, r"^- \*\*Put it on a platform:\*\*", r"^- \*\*", "docs/index.md"
        ),
        "docs/platforms/index.md's table": section(
            (root / "docs/platforms/index.md").read_text(), r"^\| platform", r"^$", "docs/platforms/index.md"
        ),
        "pyproject.toml's description": tomllib.loads((root / "pyproject.toml").read_text())["project"]["description"],
        "mkdocs.yml's site_description": description.group(1),
        "`hub --help`": help_text(),
        "the hub module's docstring": (hub.__doc__ or "").split("\n\n", 1)[0],
    }


def help_text() -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["--help"])
    return " ".join(out.getvalue().split())  # argparse wraps lines


def named(title: str, text: str) -> bool:
    """``title`` is a word of ``text``: "the terminal" as "terminal", "email" also as "Email"."""
    bare = title.removeprefix("the ")
    forms = {bare, bare[0].upper() + bare[1:]}
    return any(re.search(rf"(?<![\w-]){re.escape(form)}(?![\w-])", text) for form in forms)


def unnamed(texts: Texts, platforms: list[InstalledPlatform]) -> list[str]:
    return [
        f"{where} leaves out {p.title}" for where, text in texts.items() for p in platforms if not named(p.title, text)
    ]


def nav_pages(root: Path) -> set[str]:
    nav = (root / "mkdocs.yml").read_text().split("\nnav:", 1)[1]
    return set(re.findall(r"([\w/-]+\.md)", nav))


def without_pages(root: Path, platforms: list[InstalledPlatform]) -> list[str]:
    """Each platform has docs/platforms/SLUG.md, in the site's nav, opening with a quick start,
    and is a link to that page in the docs home's 'Put it on a platform'."""
    problems = []
    home = (root / "docs/index.md").read_text()
    nav = nav_pages(root)
    for p in platforms:
        page = f"platforms/{p.slug}.md"
        path = root / "docs" / page
        if not path.is_file():
            problems.append(f"{p.title} has no page docs/{page}")
            continue
        if page not in nav:
            problems.append(f"docs/{page} is not in mkdocs.yml's nav")
        if not re.search(r"^## Quick start", path.read_text(), re.M):
            problems.append(f"docs/{page} has no '## Quick start' section")
        if f"]({page})" not in home:
            problems.append(f"docs/index.md does not link {p.title} to {page}")
    return problems


def without_quick_starts(root: Path, platforms: list[InstalledPlatform]) -> list[str]:
    readme = (root / "README.md").read_text()
    return [
        f"README.md has no '## Quick start: {p.title}'"
        for p in platforms
        if p.extension not in QUICK_START_ELSEWHERE and f"\n## Quick start: {p.title}\n" not in readme
    ]


def without_quick_start_test(root: Path, platforms: list[InstalledPlatform]) -> list[str]:
    """extensions/NAME/tests/test_NAME_quickstart.py follows the README's quick start and the
    page's, so what a reader runs from either is tested as written."""
    problems = []
    for p in platforms:
        if p.extension in QUICK_START_ELSEWHERE:
            continue
        test = f"extensions/{p.extension}/tests/test_{p.extension}_quickstart.py"
        text = _read(root / test)
        for source, mark in (("README.md", f"Quick start: {p.title}"), (f"docs/platforms/{p.slug}.md", "")):
            if source not in text or mark not in text:
                problems.append(f"{test} does not follow the quick start of {source}")
    return problems


def _read(path: Path) -> str:
    return path.read_text() if path.is_file() else ""


CHECKS: list[Callable[[Path, list[InstalledPlatform]], list[str]]] = [
    lambda root, platforms: unnamed(places(root), platforms),
    without_pages,
    without_quick_starts,
    without_quick_start_test,
]


@pytest.fixture(scope="module")
def platforms() -> list[InstalledPlatform]:
    return installed_platforms()


def test_every_shipped_extension_is_installed_and_names_its_platform(platforms: list[InstalledPlatform]) -> None:
    """extensions/*/pyproject.toml declare each extension and its name; the installed metadata
    says the same (if not, `make setup` reinstalls them)."""
    shipped = {}
    for project in sorted(ROOT.glob("extensions/*/pyproject.toml")):
        eps = tomllib.loads(project.read_text())["project"]["entry-points"]
        modules = {v: k for k, v in eps.get(PLATFORM_GROUP, {}).items()}
        for name, module in eps[ENTRY_POINT_GROUP].items():
            assert module in modules, f"{project.relative_to(ROOT)}: {name!r} declares no name in {PLATFORM_GROUP!r}"
            shipped[name] = modules[module]
    assert len(shipped) >= 11
    installed = {p.extension: p.title for p in platforms}
    assert {k: installed.get(k) for k in shipped} == shipped, "the installed metadata is stale: run `make setup`"


def test_every_platform_is_named_in_every_list(platforms: list[InstalledPlatform]) -> None:
    problems = unnamed(places(ROOT), platforms)
    assert not problems, "\n".join(problems)


def test_every_platform_has_a_page_in_the_nav_with_a_quick_start(platforms: list[InstalledPlatform]) -> None:
    problems = without_pages(ROOT, platforms)
    assert not problems, "\n".join(problems)


def test_every_platform_has_a_readme_quick_start(platforms: list[InstalledPlatform]) -> None:
    problems = without_quick_starts(ROOT, platforms)
    assert not problems, "\n".join(problems)


def test_a_test_follows_each_quick_start_of_the_readme_and_the_page(platforms: list[InstalledPlatform]) -> None:
    problems = without_quick_start_test(ROOT, platforms)
    assert not problems, "\n".join(problems)


# The checks fail when they should: on doctored copies of the repository's texts.


def test_a_name_taken_out_of_one_list_is_reported(platforms: list[InstalledPlatform]) -> None:
    texts = places(ROOT)
    where = "docs/index.md's diagram"
    texts[where] = texts[where].replace("Slack", "Slock")
    assert unnamed(texts, platforms) == [f"{where} leaves out Slack"]


def test_a_new_platform_is_reported_everywhere_it_is_missing(platforms: list[InstalledPlatform]) -> None:
    zulip = InstalledPlatform(extension="zulip", title="Zulip", distribution="hub-zulip")
    problems = [problem for check in CHECKS for problem in check(ROOT, [*platforms, zulip])]
    # the lists, its page, its quick start, and a test for that in the README and on the page
    assert len([p for p in problems if "zulip" in p.lower()]) == len(places(ROOT)) + 4
    assert all("zulip" in p.lower() for p in problems), problems
