"""mkdocs.yml: the site fetches nothing from elsewhere when built or read, and its nav names
only pages that exist (``mkdocs build --strict`` in .ci/run checks links and anchors)."""

from __future__ import annotations

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
    for asset in [*config["extra_javascript"], *config.get("extra_css", [])]:
        assert "://" not in asset and (ROOT / "docs" / asset).is_file(), asset


def test_the_nav_names_pages_that_exist() -> None:
    pages = nav_pages(site()["nav"])
    assert len(pages) >= 30
    missing = [p for p in pages if not (ROOT / "docs" / p).is_file()]
    assert not missing, missing
