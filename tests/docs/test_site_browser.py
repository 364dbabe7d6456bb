"""The docs site in a real browser: Playwright drives Debian's Chromium, headless, on the site
as ``mkdocs build`` writes it, opened from disk (``file://``), as a reader without a server has it.

The site is built once for the module. Each page is opened on a desktop (1280x800) and a phone
(390x844): no table or code block may stick out of the content column or the screen, unless it
scrolls inside a box that stays in the column; on a desktop a table fits without scrolling,
and the generated references (config keys, the hub command) fit on a phone too, meaning column
included. Search must answer from disk, and the header, tabs and footer must be there.
Screenshots go to the test's temporary folder, and each failure names its own.

Without ``/usr/bin/chromium`` (or Playwright) the tests skip, saying why, except under CI
(``CI`` set), where they must run: ``.ci/run`` installs Chromium (as tests/ui/test_browser.py).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._support.browser import LAUNCH, needs_browser
from tests.docs.test_code_blocks import ROOT

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
PAGES = [
    "troubleshooting.html",
    "reference/config.html",
    "getting-started/config.html",
    "platforms/telegram.html",
    "architecture/index.html",
    "operating/cli.html",
    "index.html",
]

with contextlib.suppress(ImportError):  # without it the tests skip, saying why
    from playwright.sync_api import Browser, Page, sync_playwright
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

pytestmark = [needs_browser("the docs site's browser tests"), pytest.mark.timeout(300)]

# For each table and code block of the page's content: its box, the content column's, the
# screen's, and the box that clips it if one scrolls sideways (the table's wrapper, the
# code block's <code>), with how far its content reaches.
MEASURE = r"""() => {
  const column = document.querySelector('.md-content').getBoundingClientRect();
  const scrolls = (el) => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
  const out = [];
  const blocks = document.querySelectorAll('.md-content table, .md-content pre');
  blocks.forEach((el, i) => {
    let clip = null;
    if (el.tagName === 'PRE') {
      const code = el.querySelector(':scope > code');
      if (code && scrolls(code)) clip = code;
    }
    for (let up = el.parentElement; !clip && up && !up.classList.contains('md-content'); up = up.parentElement) {
      if (scrolls(up)) clip = up;
    }
    const box = (clip || el).getBoundingClientRect();
    const head = el.tagName === 'TABLE' ? Array.from(el.querySelectorAll('th')).map(th => th.textContent.trim()) : [];
    el.setAttribute('data-measured', String(i));
    out.push({
      index: i, tag: el.tagName, head,
      text: el.textContent.replace(/\s+/g, ' ').trim().slice(0, 60),
      left: box.left, right: box.right,
      scrolls: clip !== null,
      overflow: clip ? clip.scrollWidth - clip.clientWidth : el.scrollWidth - el.clientWidth,
      own_right: el.getBoundingClientRect().right,
    });
  });
  return {column: [column.left, column.right], screen: document.documentElement.clientWidth, blocks: out};
}"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    env.pop("HUB_REPO_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return out


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as pw:
        b = pw.chromium.launch(**LAUNCH)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


def open_page(browser: Browser, url: str, viewport: dict[str, int]) -> Page:
    page = browser.new_context(viewport=viewport).new_page()
    page.set_default_timeout(8000)
    outside: list[str] = []
    page.on("request", lambda r: None if r.url.startswith(("file:", "data:", "blob:")) else outside.append(r.url))
    page.goto(url)
    page.wait_for_selector(".md-content")
    page.evaluate("() => document.fonts.ready")
    assert not outside, f"{url} fetched from elsewhere: {outside}"
    return page


def _is_reference(block: dict[str, Any]) -> bool:
    """A table of a generated reference: its last column is the meaning (docs/hooks/)."""
    return bool(block["head"]) and block["head"][-1] == "meaning"


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
@pytest.mark.parametrize("path", PAGES)
def test_no_table_or_code_block_overflows_its_column(
    site: Path, browser: Browser, shots: Path, path: str, viewport: dict[str, int]
) -> None:
    page = open_page(browser, (site / path).as_uri(), viewport)
    try:
        shot = shots / f"{path.replace('/', '_')}-{viewport['width']}.png"
        page.screenshot(path=shot)
        found = page.evaluate(MEASURE)
        left, right = found["column"]
        screen = found["screen"]
        assert left >= 0 and right <= screen + 0.5, (
            f"{path}: the content column {found['column']} is wider than the screen"
        )
        problems: list[str] = []
        worst: int | None = None  # the first block at fault: the screenshot shows it
        for block in found["blocks"]:
            what = f"{block['tag'].lower()} #{block['index']} ({block['text']!r})"
            wrong = ""
            if block["left"] < left - 0.5 or block["right"] > right + 0.5:
                wrong = f"reaches {block['left']:.0f}..{block['right']:.0f}, the column is {left:.0f}..{right:.0f}"
            elif block["overflow"] > 1 and not block["scrolls"]:
                wrong = f"is {block['overflow']}px wider than its box, which does not scroll"
            elif block["tag"] == "TABLE" and block["overflow"] > 1 and (viewport == DESKTOP or _is_reference(block)):
                wrong = f"must be scrolled sideways at {viewport['width']}px ({block['overflow']}px hidden)"
            if wrong:
                problems.append(f"{what} {wrong}")
                worst = block["index"] if worst is None else worst
        if worst is not None:
            page.locator(f"[data-measured='{worst}']").scroll_into_view_if_needed()
            page.screenshot(path=shot)
        assert not problems, f"{path} at {viewport['width']}x{viewport['height']} (screenshot {shot}):\n" + "\n".join(
            problems
        )
    finally:
        page.context.close()


def test_the_references_read_row_by_row_on_a_phone(site: Path, browser: Browser, shots: Path) -> None:
    """On a phone a generated reference's meaning sits under its key, as wide as the column."""
    page = open_page(browser, (site / "reference/config.html").as_uri(), PHONE)
    try:
        shot = shots / "reference_config-rows-390.png"
        cell = page.locator(".md-content table tbody tr").first.locator("td").last
        cell.scroll_into_view_if_needed()
        page.screenshot(path=shot)
        box = cell.bounding_box()
        column = page.locator(".md-content__inner").bounding_box()
        assert box and column
        assert box["x"] >= column["x"] - 1 and box["x"] + box["width"] <= column["x"] + column["width"] + 1, shot
        assert box["width"] > column["width"] * 0.7, (
            f"the meaning is squeezed into {box['width']:.0f}px (screenshot {shot})"
        )
    finally:
        page.context.close()


def test_search_answers_from_disk(site: Path, browser: Browser, shots: Path) -> None:
    """Opened as file://, where a browser refuses to fetch search_index.json: the offline
    plugin's inlined index (search/search_index.js) is what answers."""
    page = open_page(browser, (site / "index.html").as_uri(), DESKTOP)
    try:
        page.click("input.md-search__input")
        page.keyboard.type("heartbeat")  # typed, as a reader does: search listens to keys
        shot = shots / "search-1280.png"
        try:
            page.wait_for_selector(".md-search-result__item")
        except PlaywrightTimeout as e:
            page.screenshot(path=shot)
            raise AssertionError(f"search found nothing for 'heartbeat' from disk (screenshot {shot})") from e
        page.screenshot(path=shot)
        links = page.locator(".md-search-result__item a").evaluate_all("as => as.map(a => a.href)")
        assert any("operating/cli.html" in link for link in links), (links, shot)
    finally:
        page.context.close()


def test_tabs_footer_and_licence(site: Path, browser: Browser, shots: Path) -> None:
    page = open_page(browser, (site / "architecture/index.html").as_uri(), DESKTOP)
    try:
        shot = shots / "architecture-tabs-1280.png"
        page.screenshot(path=shot)
        tabs = page.locator(".md-tabs__link").all_inner_texts()
        assert {"Getting started", "Platforms", "Operating", "Reference", "Troubleshooting"} <= set(tabs), tabs
        # the last tab ends inside the bar (past it, Material scrolls the row and hides the rest)
        room = page.evaluate(
            """() => {
                const bar = document.querySelector('.md-tabs__list');
                const tabs = bar.querySelectorAll('.md-tabs__item');
                return bar.getBoundingClientRect().right - tabs[tabs.length - 1].getBoundingClientRect().right;
            }"""
        )
        assert room >= 0, f"the tabs do not fit in one row at 1280px, {-room:.0f}px too wide (screenshot {shot})"
        toc = page.locator(".md-sidebar--secondary .md-nav__link").all_inner_texts()
        assert {"The layers", "The packages", "Where things go"} <= set(toc), toc
        footer = page.locator(".md-footer").inner_text()
        assert "Next" in footer or "Previous" in footer, footer
        assert "Apache License 2.0" in page.locator(".md-copyright").inner_text()
        # built without HUB_REPO_URL (the fixture), the header links no repository
        assert page.locator(".md-header .md-source").count() == 0
    finally:
        page.context.close()
