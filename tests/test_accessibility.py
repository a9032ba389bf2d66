"""The built book for every reader: a phone, 200 % zoom, a screen reader, dark mode.

Needs the built book, Chromium (like tests/test_browser.py, whose fixtures it uses) and
axe-core from tools/axe (`make axe`); ``make test-browser`` provides all three, then runs it.

- axe-core (WCAG 2.1 A and AA, and best practices) on eight pages of each edition, in light and
  dark mode: no critical and no serious violation;
- reflow (WCAG 1.4.10): no page is wider than a 390 px phone window or a 640 px one (a 1280 px
  window at 200 % zoom); code blocks, wide tables and formulas scroll inside their own box;
- every image has an alt text that says something: not empty, not a file path;
- the figures that move: a short live summary of the state, not the whole drawing; a slider
  says its value; the figure is named by its caption; every Tab stop has a name.
(The contrast of every number drawn in a moving figure: tests/test_interactive_figures.py.)
"""

from __future__ import annotations

import re

import pytest
from bs4 import BeautifulSoup
from test_browser import CHAPTER_PAGES, EDITIONS, HTML, ROOT, TOC_PAGES, _open, browser, site  # noqa: F401

AXE = ROOT / "tools" / "axe" / "node_modules" / "axe-core" / "axe.min.js"
# The pages a reader meets most: the preface, chapters of both parts, the reference pages.
AXE_PAGES = ["book/index", "book/chapters/01_what_is_attention", "book/chapters/05_masked_attention",
             "book/chapters/07_bert_self_attention", "book/chapters/09_efficient_attention",
             "book/chapters/11_a_real_model", "book/api", "book/glossary"]
MODES = ("light", "dark")
PATH = re.compile(r"(?:^|/)[\w.-]+\.(?:png|jpe?g|svg|gif|webp)$|^(?:\.\./)+|_images/")


def _mode(driver, mode: str) -> None:
    """The theme's colour mode, as its switch sets it, with the theme's colour transitions
    turned off: axe must read the colours of the mode, not a moment of the fade between two
    (a heavy page once showed dark text on the light background mid-fade)."""
    driver.execute_script(
        "const still = document.createElement('style');"
        "still.textContent = '*, *::before, *::after {transition: none !important;"
        " animation: none !important}';"
        "document.head.appendChild(still);"
        "document.documentElement.dataset.mode = arguments[0];"
        "document.documentElement.dataset.theme = arguments[0];"
        "void document.body.offsetHeight;", mode)


_AXE_RUN = """
const done = arguments[arguments.length - 1];
axe.run(document, {runOnly: {type: "tag",
                             values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]}})
  .then(result => done(result.violations.map(v => ({
      id: v.id, impact: v.impact, nodes: v.nodes.length,
      example: v.nodes[0].html.slice(0, 200), why: (v.nodes[0].failureSummary || "").slice(0, 300)}))))
  .catch(error => done(String(error)));
"""


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("edition", EDITIONS)
@pytest.mark.parametrize("page", AXE_PAGES)
def test_no_serious_accessibility_violation(browser, site, page, edition, mode):
    assert AXE.is_file(), "install axe-core first (`make axe`)"
    _open(browser, f"{site}/{EDITIONS[edition]}{page}.html")
    _mode(browser, mode)
    browser.execute_script(AXE.read_text(encoding="utf-8"))
    violations = browser.execute_async_script(_AXE_RUN)
    assert isinstance(violations, list), violations
    serious = [v for v in violations if v["impact"] in ("critical", "serious")]
    assert not serious, f"{edition} {page} ({mode}): " + "\n".join(
        f"{v['impact']} {v['id']} on {v['nodes']} nodes, e.g. {v['example']!r}: {v['why']}" for v in serious)


@pytest.mark.parametrize("width", [390, 640])
@pytest.mark.parametrize("edition", EDITIONS)
def test_no_page_is_wider_than_a_phone_or_200_percent_zoom(browser, site, edition, width):
    wide = []
    browser.set_window_size(width, 900)
    try:
        for page in TOC_PAGES:
            browser.get(f"{site}/{EDITIONS[edition]}{page}.html")
            scroll, client = browser.execute_script(
                "return [document.documentElement.scrollWidth, document.documentElement.clientWidth];")
            if scroll > client:
                wide.append(f"{page}: {scroll} px in a {client} px window")
    finally:
        browser.set_window_size(1280, 1800)
    assert not wide, f"{edition}, {width} px: pages that scroll sideways: {wide}"


@pytest.mark.parametrize("edition", EDITIONS)
def test_every_image_has_an_alt_text_that_says_something(edition):
    missing = []
    for page in TOC_PAGES:
        path = HTML / f"{EDITIONS[edition]}{page}.html"
        for img in BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser").find_all("img"):
            alt = (img.get("alt") or "").strip()
            if not alt or PATH.search(alt):
                missing.append(f"{page}: {img.get('src')} alt={alt!r}")
    assert not missing, f"{len(missing)} images without a real alt text: {missing[:5]}"
    if edition == "zh":  # the Chinese pages describe their figures in Chinese
        figures = BeautifulSoup((HTML / "zh" / f"{CHAPTER_PAGES[0]}.html").read_text(encoding="utf-8"),
                                "html.parser").select("figure img")
        assert figures and all(re.search(r"[\u3400-\u9fff]", img["alt"]) for img in figures)


def test_an_alt_text_is_the_first_sentence_of_its_caption():
    import book_a11y  # tools/book_a11y.py

    assert book_a11y.alt_text("Attention as selective focus. Left: the keys.") == "Attention as selective focus."
    assert book_a11y.alt_text("注意力即选择性关注。左：键。") == "注意力即选择性关注。"
    assert book_a11y.alt_text("One sentence, e.g. this") == "One sentence, e.g. this"


def test_controls_are_named_by_what_they_show():
    import book_a11y

    html = ('<summary aria-label="Toggle hidden content">\n<p>Show code cell source</p>'
            '<button class="btn search-button-field search-button__button" title="Search" aria-label="Search">'
            '<span>Search</span></button>'
            '<button class="btn btn-sm search-button" aria-label="Search"><i></i></button>'
            '<i class="theme-switch fa-solid fa-sun fa-lg" data-mode="light" title="Light"></i>')
    fixed = book_a11y.accessible_names(html)
    assert "<summary>\n<p>Show code cell source</p>" in fixed
    assert 'search-button__button" title="Search">' in fixed  # shows its text: named by it
    assert 'class="btn btn-sm search-button" aria-label="Search"' in fixed  # an icon keeps its name
    assert '<i class="theme-switch fa-solid fa-sun fa-lg" data-mode="light" aria-hidden="true">' in fixed


_FIGURES = """
return Array.from(document.querySelectorAll('.ab-figure')).map(figure => {
  const labelled = figure.getAttribute('aria-labelledby');
  const name = labelled ? (document.getElementById(labelled) || {}).textContent : figure.getAttribute('aria-label');
  const live = Array.from(figure.querySelectorAll('[aria-live]'));
  const sliders = Array.from(figure.querySelectorAll('input[type=range]')).map(input =>
      [input.getAttribute('aria-valuetext'), input.nextElementSibling.textContent]);
  const stops = Array.from(figure.querySelectorAll('[tabindex="0"]')).map(el =>
      el.getAttribute('aria-label') || el.textContent.trim());
  const pictures = Array.from(figure.querySelectorAll('svg[role=img]')).map(svg => svg.getAttribute('aria-label'));
  return {name, live: live.map(el => [el.className, el.querySelectorAll('*').length, el.textContent]),
          sliders, stops, pictures};
});
"""


@pytest.mark.parametrize("edition", EDITIONS)
def test_a_moving_figure_speaks_to_a_screen_reader(browser, site, edition):
    pages = [page for page in CHAPTER_PAGES if 'class="ab-interactive"' in (HTML / f"{page}.html").read_text()]
    assert len(pages) >= 5
    for page in pages:
        _open(browser, f"{site}/{EDITIONS[edition]}{page}.html")
        figures = browser.execute_script(_FIGURES)
        assert figures, page
        for figure in figures:
            assert figure["name"] and len(figure["name"].strip()) > 12, f"{page}: the figure has no name"
            (live,) = figure["live"]  # one live region: the state in words, not the drawing
            assert live[0] == "ab-status" and live[1] == 0 and 0 < len(live[2]) < 200, (page, live)
            for valuetext, shown in figure["sliders"]:
                assert valuetext == shown, f"{page}: the slider says {valuetext!r}, shows {shown!r}"
            assert all(name for name in figure["stops"]), f"{page}: an unnamed Tab stop"
            assert all(re.search(r"\d", name or "") for name in figure["pictures"]), (
                f"{page}: a picture without its numbers in words: {figure['pictures']}")


def test_formulas_are_not_tab_stops(browser, site):
    _open(browser, f"{site}/{CHAPTER_PAGES[0]}.html")
    stops = browser.execute_script(
        "return document.querySelectorAll('mjx-container[tabindex]:not([tabindex=\"-1\"])').length;")
    assert stops == 0, f"{stops} formulas are Tab stops"
