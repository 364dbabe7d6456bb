"""mkdocs.yml: the site fetches nothing from elsewhere when built or read, and its nav names
only pages that exist (``mkdocs build --strict`` in .ci/run checks links and anchors)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import yaml
import yaml_env_tag

from tests.docs.test_code_blocks import ROOT


class _Loader(yaml.SafeLoader):
    """mkdocs.yml's ``!!python/name:`` tags read as plain strings (nothing is imported)."""


_Loader.add_multi_constructor("tag:yaml.org,2002:python/name:", lambda loader, suffix, node: suffix)
_Loader.add_constructor("!ENV", yaml_env_tag.construct_env_tag)  # as mkdocs reads it


def site() -> dict[str, Any]:
    return yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)


def nav_pages(entries: Any) -> list[str]:
    out: list[str] = []
    for entry in entries if isinstance(entries, list) else [entries]:
        if isinstance(entry, str):
            out.append(entry)
        elif isinstance(entry, dict):
            for value in entry.values():
                out += nav_pages(value)
    return out


def test_no_font_or_script_comes_from_elsewhere() -> None:
    config = site()
    assert config["theme"]["font"] is False, "Google Fonts would be fetched by every reader"
    # mkdocs-material fetches mermaid from a CDN unless the page has it already
    (mermaid,) = [s for s in config["extra_javascript"] if "mermaid" in s]
    text = (ROOT / "docs" / mermaid).read_text()
    assert 'globalThis["mermaid"]' in text
    polyfills = config.get("extra", {}).get("polyfills", [])
    for asset in [*config["extra_javascript"], *config.get("extra_css", []), *polyfills]:
        assert "://" not in asset and (ROOT / "docs" / asset).is_file(), asset
    # Material's offline plugin adds the iframe-worker shim from a CDN unless a polyfill is it
    if "offline" in [p if isinstance(p, str) else next(iter(p)) for p in config["plugins"]]:
        assert any("iframe-worker" in p for p in polyfills), "the offline plugin would fetch iframe-worker"


def test_the_nav_names_pages_that_exist() -> None:
    pages = nav_pages(site()["nav"])
    assert len(pages) >= 30
    missing = [p for p in pages if not (ROOT / "docs" / p).is_file()]
    assert not missing, missing


# files a user of the hub writes themselves, named by the docs but not in the repository
USERS_FILES = {"SKILL.md"}


def test_the_docs_cite_only_files_the_repository_has() -> None:
    """A page that cites DESIGN.md or another such file sends the reader to one they have."""
    present = {
        Path(line).name
        for line in subprocess.run(
            ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.splitlines()
    }
    cited = {
        (page.relative_to(ROOT / "docs").as_posix(), name)
        for page in (ROOT / "docs").rglob("*.md")
        for name in re.findall(r"\b[A-Z][A-Z_]+\.md\b", page.read_text())
    }
    missing = sorted((page, name) for page, name in cited if name not in present | USERS_FILES)
    assert not missing, f"cited but not in the repository: {missing}"
