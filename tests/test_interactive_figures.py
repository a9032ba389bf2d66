"""Figures a reader can move, in the built book, in a real browser: every control changes what is
drawn, what is drawn equals the numbers the chapter computed (the JSON its cell printed) at two
settings at least, the controls work from the keyboard and have labels, the words are Chinese
in the Chinese edition, and without JavaScript the still image shows.

Needs the built book and Chromium, like tests/test_browser.py (whose fixtures it uses);
``make test-browser`` runs it. The figures' data and their Python side are unit-tested in
tests/test_interactive.py.
"""

from __future__ import annotations

import json
import re

import pytest
from bs4 import BeautifulSoup
from test_browser import CHAPTER_PAGES, EDITIONS, HTML, _console_errors, _open, browser, site  # noqa: F401

SCRIPT = HTML / "_static" / "interactive.js"
# Pages with figures a reader can move, found in the built English edition.
PAGES = [page for page in CHAPTER_PAGES
         if 'class="ab-interactive"' in (HTML / f"{page}.html").read_text()]


def _specs(page: str, edition: str) -> list[dict]:
    soup = BeautifulSoup((HTML / f"{EDITIONS[edition]}{page}.html").read_text(), "html.parser")
    return [json.loads(holder.find("script").string) for holder in soup.select(".ab-interactive")]


def _drawn(driver, index: int) -> list[list]:
    """What figure `index` of the page draws now: the data-value of each panel's marks."""
    return driver.execute_script("""
        const figure = document.querySelectorAll('.ab-figure')[arguments[0]];
        return Array.from(figure.querySelectorAll('.ab-canvas > .ab-panel')).map(panel =>
            Array.from(panel.querySelectorAll('[data-value]')).map(mark => mark.dataset.value));
    """, index)


def _expected(spec: dict, state: str) -> list[list[str]]:
    """The numbers of `state` as the page writes them into data-value (JavaScript's String())."""
    def text(value):
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return str(value)

    panels = []
    for panel, data in zip(spec["panels"], spec["frames"][state]):
        if panel["kind"] == "heatmap":
            panels.append([text(v) for row in data["matrix"] for v in row])
        elif panel["kind"] == "bars":
            panels.append([text(v) for series in data["values"] for v in series])
        else:
            panels.append([text(v) for v in data["values"]])
    return panels


def test_at_least_five_chapters_have_a_figure_a_reader_can_move():
    assert len(PAGES) >= 5, PAGES


def test_the_script_is_the_books_own_and_light():
    assert SCRIPT.is_file() and SCRIPT.stat().st_size < 30_000
    for page in PAGES:
        weight = sum(len(s.encode()) for s in re.findall(
            r'<div class="ab-interactive">.*?</div>', (HTML / f"{page}.html").read_text(), re.S))
        assert weight + SCRIPT.stat().st_size < 1_000_000, (page, weight)


@pytest.mark.parametrize("edition", EDITIONS)
@pytest.mark.parametrize("page", PAGES)
def test_every_control_moves_the_figure_and_it_draws_the_chapters_numbers(browser, site, page, edition):
    _console_errors(browser)
    _open(browser, f"{site}/{EDITIONS[edition]}{page}.html")
    specs = _specs(page, edition)
    ready = browser.execute_script(
        "return Array.from(document.querySelectorAll('.ab-figure')).map(f => f.dataset.ready);")
    assert ready == ["true"] * len(specs), f"{page}: {ready}"
    for index, spec in enumerate(specs):
        hidden = browser.execute_script(
            "return Array.from(document.querySelectorAll('.ab-figure')[arguments[0]]"
            ".parentElement.querySelectorAll(':scope > img')).map(img => img.hidden);", index)
        assert hidden == [True], f"{page}: the still image is not replaced ({hidden})"
        state = ",".join(map(str, spec["default"]))
        assert _drawn(browser, index) == _expected(spec, state), f"{page}, default {state}"
        for c, control in enumerate(spec["controls"]):
            before = _drawn(browser, index)
            new = browser.execute_script("""
                const figure = document.querySelectorAll('.ab-figure')[arguments[0]];
                const input = figure.querySelectorAll('[data-control]')[arguments[1]];
                const label = figure.querySelector(`label[for="${input.id}"]`);
                if (!label || !label.textContent.trim()) return "no label";
                input.focus();
                return input.tagName;
            """, index, c)
            assert new in ("SELECT", "INPUT"), f"{page}: control {control['name']}: {new}"
            # From the keyboard: an arrow key moves a slider and a select to the next option.
            from selenium.webdriver.common.keys import Keys
            browser.switch_to.active_element.send_keys(Keys.ARROW_RIGHT if new == "INPUT" else Keys.ARROW_DOWN)
            state = browser.execute_script(
                "return document.querySelectorAll('.ab-figure')[arguments[0]].dataset.state;", index)
            assert state != ",".join(map(str, spec["default"])) or len(control["options"]) == 1
            after = _drawn(browser, index)
            assert after != before, f"{page}: moving {control['name']} changed nothing"
            assert after == _expected(spec, state), f"{page}, state {state}"
            browser.execute_script("""
                const figure = document.querySelectorAll('.ab-figure')[arguments[0]];
                const input = figure.querySelectorAll('[data-control]')[arguments[1]];
                input.value = String(arguments[2]);
                input.dispatchEvent(new Event(input.tagName === 'SELECT' ? 'change' : 'input'));
            """, index, c, spec["default"][c])
    assert not _console_errors(browser), page


_CONTRAST = """
const channel = c => { const s = c / 255; return s <= 0.04045 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4; };
const luminance = colour => { const [r, g, b] = colour.match(/[\\d.]+/g).slice(0, 3).map(Number).map(channel);
                              return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
return Array.from(document.querySelectorAll('.ab-figure text.ab-cell-text')).map(text => {
  const cell = text.parentElement.querySelectorAll('rect.ab-cell')[
    Array.from(text.parentElement.querySelectorAll('text.ab-cell-text')).indexOf(text)];
  const [a, b] = [luminance(getComputedStyle(text).fill), luminance(getComputedStyle(cell).fill)];
  return [text.textContent, (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)];
});
"""


@pytest.mark.parametrize("mode", ["light", "dark"])
@pytest.mark.parametrize("page", PAGES)
def test_every_number_drawn_on_a_heatmap_cell_contrasts_at_least_4_5_to_1(browser, site, page, mode):
    """In both colour modes (the theme's data-mode), every number on a cell, at the default state."""
    _open(browser, f"{site}/{page}.html")
    browser.execute_script("document.documentElement.dataset.mode = arguments[0];"
                           "document.documentElement.dataset.theme = arguments[0];", mode)
    ratios = browser.execute_script(_CONTRAST)
    low = [(text, round(ratio, 2)) for text, ratio in ratios if ratio < 4.5]
    assert not low, f"{page} ({mode}): {len(low)} of {len(ratios)} numbers under 4.5:1, e.g. {low[:5]}"


@pytest.mark.parametrize("page", PAGES)
def test_the_chinese_edition_labels_the_controls_in_chinese(browser, site, page):
    _open(browser, f"{site}/zh/{page}.html")
    labels = browser.execute_script(
        "return Array.from(document.querySelectorAll('.ab-controls label')).map(l => l.textContent);")
    assert labels and all(re.search(r"[\u3400-\u9fff]|^[A-Za-zβ_ ]{1,4}$", label) for label in labels), labels


@pytest.mark.parametrize("page", PAGES)
def test_without_javascript_the_still_image_shows(browser, site, page):
    browser.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": True})
    try:
        browser.get(f"{site}/{page}.html")
        shown = browser.execute_script("""
            return Array.from(document.querySelectorAll('.ab-interactive')).map(holder => {
                const cell = holder.closest('.cell');
                let next = cell.nextElementSibling;
                while (next && !next.classList.contains('cell')) next = next.nextElementSibling;
                const image = cell.querySelector('.cell_output img') || next.querySelector('.cell_output img');
                return !!image && !image.hidden && image.getBoundingClientRect().height > 50
                    && !document.querySelector('.ab-figure');
            });""")
        assert shown and all(shown), f"{page}: {shown}"
    finally:
        browser.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": False})
