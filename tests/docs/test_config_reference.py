"""The config reference page is generated from the config models (docs/hooks/config_reference.py):
every key the code accepts is on it, with a meaning, and a key added to a model appears."""

from __future__ import annotations

import importlib.util
import re
from types import ModuleType

from pydantic import BaseModel, Field

from hub.config import HubConfig
from tests.docs.test_code_blocks import ROOT


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("config_reference", ROOT / "docs" / "hooks" / "config_reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tables(text: str) -> dict[str, dict[str, str]]:
    """``{"[hub]": {"data_dir": "meaning", ...}, ...}`` from the generated Markdown."""
    out: dict[str, dict[str, str]] = {}
    section = ""
    for line in text.splitlines():
        if m := re.match(r"### `(\[.+\])`", line):
            section = m.group(1)
            out[section] = {}
        elif section and (m := re.match(r"\| `([\w-]+)` \|.*\| (.*) \|$", line)):
            out[section][m.group(1)] = m.group(2).strip()
    return out


def test_every_key_of_every_section_is_on_the_page_with_a_meaning() -> None:
    gen = generator()
    found = tables(gen.config_reference())
    expected: dict[str, type[BaseModel]] = {}
    for name, field in HubConfig.model_fields.items():
        nested = gen._nested(field.annotation)
        if nested is not None:
            expected[f"[{name}{nested[0]}]"] = nested[1]
    expected.update({f"[extensions.{name}]": model for name, model in gen.extension_models()})
    assert {"[extensions.telegram]", "[extensions.discord]", "[extensions.twitter]"} <= set(expected)
    for section, model in expected.items():
        assert section in found, f"{section} is not on the page"
        assert set(found[section]) == set(model.model_fields), section
        blank = [key for key, meaning in found[section].items() if not meaning]
        assert not blank, f"{section}: {blank} have no description= (or docstring) in their model"


def test_a_key_added_to_a_model_appears_with_its_default_and_bounds() -> None:
    class Section(BaseModel):
        """A section."""

        brand_new: int = Field(7, ge=1, description="a key the page has never seen")

    text = generator().section_table("[new]", Section)
    assert "| `brand_new` | integer (≥ 1) | `7` | a key the page has never seen |" in text


def test_the_page_keeps_its_marker() -> None:
    gen = generator()
    assert gen.MARKER in (ROOT / "docs" / gen.PAGE).read_text()
