"""The built HTML book, as its readers meet it: checked in a real, headless Chromium.

Needs the built book (``make build``) and Debian's ``chromium`` and ``chromium-driver``;
``make test-browser`` provides both, then runs this file. The HTML is served on localhost by
Python's ``http.server``; the browser may fetch nothing else.

The book has two editions: English in ``_build/html`` and Chinese (中文版) in
``_build/html/zh``, with the same page paths. Through every page of ``_toc.yml``, in both:
no console errors, every request served from localhost, math typeset by MathJax, every image
loaded, and each chapter's Colab button opens its committed notebook on the repository's
branch, in the page's language (book/chapters/zh/ on a Chinese page). Then: the search page finds "softmax", and the
Chinese one finds 掩码 (masking) in the masking chapter; the link in every page's header opens
the same page in the other edition, both ways, with JavaScript on and off; Chinese pages
declare ``lang="zh-CN"`` and their text is drawn with a CJK font; figures keep a white
background in dark mode; the print stylesheet does not cut figures. Screenshots of pages of
both editions are saved to ``_build/screenshots/``. Static checks of the HTML (no external
scripts, styles or fonts; every public name of the package in the API page; the language
links and attributes; the interface labels that Sphinx, the theme and the extensions write, in
the language of the edition) need no browser and run first; the labels that their scripts
write are checked in the browser.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from bs4 import BeautifulSoup
from chapters import header_links

ROOT = Path(__file__).resolve().parent.parent
# The build folder may be moved (`jupyter-book build --path-output DIR` builds DIR/_build).
BUILD = Path(os.environ.get("ATTENTION_BOOK_BUILD", ROOT / "_build")).resolve()
HTML = BUILD / "html"
SCREENSHOTS = BUILD / "screenshots"
# The two editions: their folders in the built site and the language their pages declare.
EDITIONS = {"en": "", "zh": "zh/"}
LANG = {"en": "en", "zh": "zh-CN"}
# Fonts that draw Chinese (fonts-wqy-microhei is the one `make chromium` installs).
CJK_FONTS = ("WenQuanYi", "Noto Sans CJK", "Noto Serif CJK", "Source Han", "Droid Sans Fallback")
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
COLAB = "https://colab.research.google.com/github/"
WHITE = "rgb(255, 255, 255)"


# --- what the book should contain ------------------------------------------------------------
def _toc_files(node) -> list[str]:
    files = []
    if isinstance(node, dict):
        if "file" in node:
            files.append(node["file"])
        for key in ("root", "parts", "chapters", "sections"):
            value = node.get(key)
            if key == "root" and value:
                files.append(value)
            elif isinstance(value, list):
                for child in value:
                    files += _toc_files(child)
    return files


TOC_PAGES = [Path(f).with_suffix("").as_posix() for f in _toc_files(yaml.safe_load((ROOT / "_toc.yml").read_text()))]
CHAPTER_PAGES = [page for page in TOC_PAGES if page.startswith("book/chapters/")]
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())


def _html(page: str, edition: str = "en") -> Path:
    return HTML / f"{EDITIONS[edition]}{page}.html"


def _soup(page: str, edition: str = "en") -> BeautifulSoup:
    path = _html(page, edition)
    assert path.is_file(), f"{path} is missing: build the book (`make build`)"
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


@functools.cache
def _tracked_files() -> frozenset[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    return frozenset(out.stdout.splitlines())


def _chapter_with_figure() -> str:
    for page in CHAPTER_PAGES:
        if _soup(page).select(".cell_output img"):
            return page
    raise AssertionError("no chapter page has a figure in a cell output")


def _site_pages(edition: str) -> list[Path]:
    """Every HTML page of one edition (the other edition's folder left out)."""
    root = HTML / EDITIONS[edition]
    pages = [path for path in root.rglob("*.html") if "_static" not in path.parts]
    if edition == "en":
        pages = [path for path in pages if path.relative_to(HTML).parts[0] != EDITIONS["zh"].strip("/")]
    return sorted(pages)


# --- static checks of the HTML (no browser) ---------------------------------------------------
@pytest.mark.parametrize("edition", EDITIONS)
def test_the_toc_lists_chapters_and_every_toc_page_is_built(edition):
    assert CHAPTER_PAGES, "_toc.yml lists no chapter"
    missing = [page for page in TOC_PAGES if not _html(page, edition).is_file()]
    assert not missing, f"pages of _toc.yml not in {HTML / EDITIONS[edition]}: {missing}"


@pytest.mark.parametrize("edition", EDITIONS)
def test_every_page_declares_its_language(edition):
    pages = _site_pages(edition)
    assert len(pages) > len(TOC_PAGES), pages
    wrong = {}
    for path in pages:
        html = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser").find("html")
        if html is None:  # the redirect index.html is a bare <meta> refresh
            continue
        if html.get("lang") != LANG[edition]:
            wrong[str(path.relative_to(HTML))] = html.get("lang")
    assert not wrong, f"pages that do not declare lang={LANG[edition]!r}: {wrong}"


@pytest.mark.parametrize("edition", EDITIONS)
def test_every_page_links_to_itself_in_the_other_edition(edition):
    """A plain relative <a href> in the header, to the page of the same path in the other edition."""
    other = "zh" if edition == "en" else "en"
    checked = 0
    for path in _site_pages(edition):
        links = header_links(path, "a.book-edition-link[href]")
        if links is None:  # the redirect index.html
            continue
        page = path.relative_to(HTML / EDITIONS[edition])
        assert len(links) == 1, f"{page}: expected one link to the other edition, found {links}"
        href = links[0]["href"]
        assert not EXTERNAL.match(href) and not href.startswith("/"), f"{page}: not relative: {href}"
        target = (path.parent / href).resolve()
        assert target == (HTML / EDITIONS[other] / page).resolve(), f"{page}: links to {target}"
        assert target.is_file(), f"{page}: {href} does not exist"
        assert links[0].get("hreflang") == LANG[other] and links[0].get_text(strip=True), links[0]
        checked += 1
    assert checked >= len(TOC_PAGES), checked


EXTERNAL = re.compile(r"^(https?:)?//", re.I)

# --- the interface: labels written by Sphinx, the theme and the extensions, not the page's text --
CJK = re.compile(r"[\u4e00-\u9fff]")
# (what, CSS selector, attribute or None for the element's text). A cross-reference's title
# (a.reference) and a <link>'s title name a page: they are text.
INTERFACE = [
    ("tooltips", "[title]:not(a.reference):not(link)", "title"),
    ("tooltips", "[data-bs-title]", "data-bs-title"),
    ("labels for screen readers", "[aria-label]", "aria-label"),
    ("placeholders", "[placeholder]", "placeholder"),
    ("button icons", ".btn img[alt]", "alt"),
    ("button texts", ".btn__text-container, .search-button__default-text", None),
    ("exercise titles", ".exercise > .admonition-title > .caption-number", None),
    ("solution titles", ".solution > .admonition-title", None),
    ("hidden code cells", "details.hide > summary > .admonition-title", None),
    ("previous and next page", ".prev-next-subtitle", None),
    ("the page's contents", ".onthispage", None),
]
# What only the scripts write, once the page has loaded.
SCRIPTED_INTERFACE = [
    ("tooltips", "[data-bs-original-title]", "data-bs-original-title"),
    ("toggle hints", "[data-toggle-hint]", "data-toggle-hint"),
    ("copy buttons", "[data-tooltip]", "data-tooltip"),
    ("search results", "#search-results > h2, #search-results > .search-summary", None),
]
# sphinx-togglebutton's hints, given to its script in the page.
TOGGLE_HINTS = re.compile(r"let toggleHint(?:Show|Hide) = '([^']*)';")
NAMES = {"Colab", ".ipynb", ".md", ".pdf"}  # the same in every language


def _language_of(element) -> str | None:
    tag = element if element.get("lang") else element.find_parent(lang=True)
    return tag.get("lang") if tag else None


def _interface_labels(soup: BeautifulSoup, interface=INTERFACE) -> dict[str, list[str]]:
    """{what: labels} of a page's interface, names and parts in another language (the link to
    the other edition) left out."""
    language = soup.find("html").get("lang")
    labels: dict[str, list[str]] = {}
    for what, selector, attribute in interface:
        for element in soup.select(selector):
            text = " ".join((element.get(attribute) if attribute else element.get_text(" ")).split())
            if text and text not in NAMES and _language_of(element) == language:
                labels.setdefault(what, []).append(text)
    for script in soup.find_all("script"):
        labels.setdefault("toggle hints", []).extend(TOGGLE_HINTS.findall(script.text))
    return {what: found for what, found in labels.items() if found}


def _in_the_wrong_language(labels: dict[str, list[str]], edition: str) -> dict[str, list[str]]:
    """The labels without Chinese on a Chinese page, or with Chinese on an English one."""
    wrong = {what: sorted({label for label in found if bool(CJK.search(label)) != (edition == "zh")})
             for what, found in labels.items()}
    return {what: found for what, found in wrong.items() if found}


@pytest.mark.parametrize("edition", EDITIONS)
def test_interface_labels_are_in_the_language_of_the_edition(edition):
    """Tooltips, buttons, "Solution", "Show code cell source", ...: English on English pages,
    Chinese on Chinese pages, on every page."""
    kinds, wrong = set(), {}
    for path in _site_pages(edition):
        soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
        if soup.find("html") is None:  # the redirect index.html
            continue
        labels = _interface_labels(soup)
        kinds |= set(labels)
        wrong |= {f"{path.relative_to(HTML)}: {what}": found
                  for what, found in _in_the_wrong_language(labels, edition).items()}
    assert not wrong, f"interface labels not in the language of the edition: {wrong}"
    expected = {what for what, _, _ in INTERFACE} | {"toggle hints"}
    assert kinds == expected, f"kinds of labels not found in the book: {expected - kinds}"



def test_every_table_header_of_the_chinese_edition_is_translated():
    """Tables are translated wherever they stand, inside a dropdown too (Sphinx's i18n skipped
    the cells of a table nested in a directive: tools/book_i18n.py gives them their source)."""
    english = []
    for path in _site_pages("zh"):
        soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
        for header in soup.select("article th"):
            for hidden in header.select(".math, code, mjx-container"):
                hidden.decompose()
            text = header.get_text(" ", strip=True)
            if re.search(r"[A-Za-z]{3,}", text) and not CJK.search(text):
                english.append(f"{path.relative_to(HTML)}: {text}")
    assert not english, english


@pytest.mark.parametrize("edition", EDITIONS)
def test_the_colab_notebooks_number_figures_exercises_and_equations_as_the_book(edition):
    """A Colab notebook writes the numbers Colab cannot compute (Fig. N or 图 N, Exercise N or
    练习 N, \\tag{N}): they are the numbers of the built pages of its edition, in the same order."""
    import nbformat

    figure, exercise = {"en": ("Fig.", "Exercise"), "zh": ("图", "练习")}[edition]
    for page in CHAPTER_PAGES:
        notebook = ROOT / _notebook(page, edition)
        prose = "\n".join(cell.source for cell in nbformat.read(notebook, as_version=4).cells
                          if cell.cell_type == "markdown")
        ours = [re.findall(rf"^\*\*{re.escape(figure)} (\d+)\*\*", prose, re.M),
                re.findall(rf"^\*\*{exercise} (\d+)\*\*", prose, re.M),
                re.findall(r"\\tag\{(\d+)\}", prose)]
        soup = BeautifulSoup(_html(page, edition).read_text(encoding="utf-8"), "html.parser")
        theirs = [[re.search(r"\d+", span.get_text())[0] for span in soup.select(selector)]
                  for selector in ("figure .caption-number",
                                   "div.exercise p.admonition-title span.caption-number", "span.eqno")]
        assert ours == theirs, f"{page}: figures, exercises, equations {ours} != the page's {theirs}"


def test_no_page_loads_anything_from_the_internet():
    """Scripts, styles, fonts, images and frames are served with the book (links may leave)."""
    offenders = []
    for path in sorted(HTML.rglob("*.html")):
        soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
        for tag, attribute in (("script", "src"), ("img", "src"), ("iframe", "src"),
                               ("source", "src"), ("link", "href")):
            for element in soup.find_all(tag):
                url = element.get(attribute) or ""
                if tag == "link" and not {"stylesheet", "preload", "icon", "modulepreload",
                                          "prefetch", "manifest"} & set(element.get("rel", [])):
                    continue
                if EXTERNAL.match(url):
                    offenders.append(f"{path.relative_to(HTML)}: <{tag} {attribute}={url}>")
        for style in soup.find_all("style"):
            offenders += [f"{path.relative_to(HTML)}: <style> {u}" for u in re.findall(r"url\(\s*['\"]?(?:https?:)?//[^)]*\)", style.text)]
    for css in sorted(HTML.rglob("*.css")):
        text = css.read_text(encoding="utf-8", errors="replace")
        offenders += [f"{css.relative_to(HTML)}: {u}" for u in re.findall(r"(?:url\(|@import\s+)\s*['\"]?(?:https?:)?//[^)'\";]*", text)]
    assert not offenders, "external resources:\n" + "\n".join(offenders)


@pytest.mark.parametrize("edition", EDITIONS)
def test_mathjax_is_served_by_the_book(edition):
    scripts = [s.get("src", "") for s in _soup(CHAPTER_PAGES[0], edition).find_all("script")]
    mathjax = [src for src in scripts if "mathjax" in src.lower()]
    assert mathjax, "no MathJax script on a chapter page"
    for src in mathjax:
        # Sphinx appends ?v=<checksum> when the file was already there (a build over a build)
        local = (_html(CHAPTER_PAGES[0], edition).parent / src.split("?")[0]).resolve()
        assert local.is_file(), f"MathJax script {src} is not in the built book"


@pytest.mark.parametrize("edition", EDITIONS)
def test_every_public_name_is_in_the_api_reference(edition):
    import attention_book

    documented = {dt.get("id") for dt in _soup("book/api", edition).select("dt.sig[id]")}
    missing = [name for name in attention_book.__all__ if f"attention_book.{name}" not in documented]
    assert attention_book.__all__
    assert not missing, f"public names missing from the API page (rebuild the book?): {missing}"


@pytest.mark.parametrize("edition", EDITIONS)
def test_each_colab_button_opens_a_committed_notebook_on_the_branch(edition):
    """The chapter's notebook in the page's language: book/chapters/zh/ for a Chinese page."""
    org_repo = urlsplit(CONFIG["repository"]["url"]).path.strip("/")
    branch = CONFIG["repository"]["branch"]
    for page in CHAPTER_PAGES:
        links = [a["href"] for a in _soup(page, edition).find_all("a", href=True) if a["href"].startswith(COLAB)]
        assert len(links) == 1, f"{page}: expected one Colab button, found {links}"
        match = re.fullmatch(re.escape(COLAB) + r"([^/]+/[^/]+)/blob/([^/]+)/(.+)", links[0])
        assert match, f"{page}: unexpected Colab URL {links[0]}"
        assert match[1] == org_repo, f"{page}: Colab opens {match[1]}, not {org_repo}"
        assert match[2] == branch == "main", f"{page}: Colab opens branch {match[2]}"
        assert match[3] == _notebook(page, edition), f"{page}: Colab opens {match[3]}"
        assert match[3] in _tracked_files(), f"{page}: {match[3]} is not committed (git ls-files)"


def _notebook(page: str, edition: str) -> str:
    """The notebook a chapter page's Colab button opens: the edition's plain-Markdown one."""
    folder, name = page.rsplit("/", 1)
    return f"{folder}/{edition}/{name}.ipynb"


@pytest.mark.parametrize("edition", EDITIONS)
def test_the_download_button_serves_the_editions_colab_notebook(edition):
    """Jupyter, like Colab, renders no MyST: the .ipynb a reader downloads is the Colab one."""
    for page in CHAPTER_PAGES:
        links = [a["href"] for a in _soup(page, edition).find_all("a", href=True)
                 if a["href"].endswith(".ipynb") and "_sources" in a["href"]]
        assert links, f"{page}: no .ipynb download link"
        served = (_html(page, edition).parent / links[0]).resolve()
        assert served.read_bytes() == (ROOT / _notebook(page, edition)).read_bytes(), f"{page}: {links[0]}"


# --- the browser -------------------------------------------------------------------------------
class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 (the signature of the base class)
        pass


@pytest.fixture(scope="module")
def site():
    """The built book on http://127.0.0.1:<free port>/."""
    assert (HTML / "index.html").is_file(), "build the book first (`make build`)"
    handler = functools.partial(_QuietHandler, directory=str(HTML))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    assert CHROMIUM.is_file() and CHROMEDRIVER.is_file(), (
        "install Debian's chromium and chromium-driver (`make test-browser` does)"
    )
    profile = tempfile.mkdtemp(prefix="attention-book-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1280,1800", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _requests(driver) -> list[str]:
    """URLs the page requested since the last call (Chrome's performance log)."""
    import json

    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def _console_errors(driver) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


_WAIT_FOR_PAGE = """
const done = arguments[arguments.length - 1];
(async () => {
  const images = Array.from(document.images);
  images.forEach(img => { img.loading = "eager"; });
  await Promise.all(images.map(img => img.complete ? null :
      new Promise(resolve => { img.onload = img.onerror = resolve; })));
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
  done(true);
})().catch(error => done(String(error)));
"""


def _open(driver, url: str) -> None:
    driver.get(url)
    result = driver.execute_async_script(_WAIT_FOR_PAGE)
    assert result is True, f"{url}: {result}"


@pytest.mark.parametrize("edition", EDITIONS)
@pytest.mark.parametrize("page", TOC_PAGES)
def test_page_in_the_browser(browser, site, page, edition):
    _requests(browser), _console_errors(browser)  # start from empty logs
    _open(browser, f"{site}/{EDITIONS[edition]}{page}.html")

    errors = _console_errors(browser)
    assert not errors, f"{page}: console errors:\n" + "\n".join(errors)

    outside = [url for url in _requests(browser)  # chrome:, data:, blob: never leave the machine
               if urlsplit(url).scheme in {"http", "https", "ws", "wss", "ftp"}
               and not url.startswith(site + "/")]
    assert not outside, f"{page}: requests outside the book: {outside}"

    broken = browser.execute_script(
        "return Array.from(document.images)"
        ".filter(img => !(img.complete && img.naturalWidth > 0)).map(img => img.src);")
    assert not broken, f"{page}: images that did not load: {broken}"

    math = browser.execute_script("""
        const math = Array.from(document.querySelectorAll('article .math, .bd-article .math'));
        return {total: math.length,
                untypeset: math.filter(el => !el.querySelector('mjx-container')).length,
                containers: document.querySelectorAll('mjx-container').length,
                errors: document.querySelectorAll('mjx-merror, mjx-container [data-mjx-error]').length};
    """)
    if math["total"] or page in CHAPTER_PAGES:  # every chapter has math
        assert math["containers"] > 0, f"{page}: MathJax rendered nothing ({math})"
        assert math["untypeset"] == 0, f"{page}: math left as TeX source ({math})"
        assert math["errors"] == 0, f"{page}: TeX errors in the math ({math})"

    if page in CHAPTER_PAGES:  # the Colab button, as the browser resolves it
        org_repo = urlsplit(CONFIG["repository"]["url"]).path.strip("/")
        hrefs = browser.execute_script(
            f"return Array.from(document.querySelectorAll('a[href^=\"{COLAB}\"]')).map(a => a.href);")
        assert hrefs == [f"{COLAB}{org_repo}/blob/main/{_notebook(page, edition)}"], f"{page}: {hrefs}"


def _search(driver, url: str) -> list[str]:
    """The result links of Sphinx's search page at `url`, once the search has finished.

    Sphinx lists the results one at a time, 5 ms apart, and writes the summary line
    ("Search finished, found N page(s)...") only after the last one: waiting for the first
    link would read a partial list.
    """
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url)
    return WebDriverWait(driver, 60).until(
        lambda d: d.execute_script(
            "const summary = document.querySelector('#search-results p.search-summary');"
            "if (!summary || !summary.innerText.trim()) return null;"
            "return Array.from(document.querySelectorAll('#search-results ul.search li a'))"
            ".map(a => a.getAttribute('href'));") or False)


def test_search_finds_softmax(browser, site):
    _console_errors(browser)
    results = _search(browser, f"{site}/search.html?q=softmax")
    assert any("chapters/" in href for href in results), f"no chapter among {results}"
    assert not _console_errors(browser)


def test_chinese_search_finds_the_masking_chapter(browser, site):
    """Sphinx's Chinese search splits words with jieba: 掩码 (mask) is a word of the index."""
    _console_errors(browser)
    results = _search(browser, f"{site}/zh/search.html?q=掩码")
    assert any("05_masked_attention" in href for href in results), f"not among {results}"
    assert not _console_errors(browser)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOTS / "zh-search.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000


def _chapter_with(*selectors: str) -> str:
    for page in CHAPTER_PAGES:
        soup = _soup(page)
        if all(soup.select(selector) for selector in selectors):
            return page
    raise AssertionError(f"no chapter page has all of {selectors}")


@pytest.mark.parametrize("edition", EDITIONS)
def test_interface_labels_once_the_scripts_ran(browser, site, edition):
    """What the scripts write (toggle buttons, copy buttons, tooltips, search results) is in the
    language of the edition too."""
    from selenium.webdriver.support.ui import WebDriverWait

    page = _chapter_with(".solution", "details.hide", "div.highlight pre")
    _open(browser, f"{site}/{EDITIONS[edition]}{page}.html")
    live = BeautifulSoup(browser.execute_script("return document.documentElement.outerHTML"), "html.parser")
    labels = _interface_labels(live, INTERFACE + SCRIPTED_INTERFACE)
    assert {"tooltips", "toggle hints", "copy buttons", "solution titles", "hidden code cells"} <= set(labels), labels
    assert not _in_the_wrong_language(labels, edition), _in_the_wrong_language(labels, edition)

    query = {"en": "softmax", "zh": "掩码"}[edition]
    assert _search(browser, f"{site}/{EDITIONS[edition]}search.html?q={query}")
    WebDriverWait(browser, 60).until(lambda d: d.execute_script(
        "const s = document.querySelector('#search-results > .search-summary'); return s && s.textContent;"))
    live = BeautifulSoup(browser.execute_script("return document.documentElement.outerHTML"), "html.parser")
    labels = _interface_labels(live, SCRIPTED_INTERFACE)
    assert len(labels.get("search results", [])) == 2, labels
    assert not _in_the_wrong_language(labels, edition), _in_the_wrong_language(labels, edition)


def _language(driver) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.TAG_NAME, "html").get_dom_attribute("lang")


def _follow_edition_link(driver) -> str:
    """Click the header's link to the other edition; the URL it arrives at."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    before = driver.current_url
    link = driver.find_element(By.CSS_SELECTOR, ".bd-header-article a.book-edition-link")
    assert link.is_displayed(), "the link to the other edition is not visible"
    link.click()
    WebDriverWait(driver, 30).until(lambda d: d.current_url != before)
    return driver.current_url


@pytest.mark.parametrize("javascript", [True, False], ids=["javascript", "no-javascript"])
def test_the_language_links_work_both_ways(browser, site, javascript):
    page = next(page for page in CHAPTER_PAGES if "masked" in page)
    browser.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": not javascript})
    try:
        browser.get(f"{site}/{page}.html")
        assert _follow_edition_link(browser) == f"{site}/zh/{page}.html"
        assert _language(browser) == LANG["zh"]
        assert _follow_edition_link(browser) == f"{site}/{page}.html"
        assert _language(browser) == LANG["en"]
    finally:
        browser.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": False})


def _platform_fonts(driver, selector: str) -> list[str]:
    """The fonts Chromium drew the text of the first `selector` element with (DevTools' CSS domain)."""
    driver.execute_cdp_cmd("DOM.enable", {})
    driver.execute_cdp_cmd("CSS.enable", {})
    root = driver.execute_cdp_cmd("DOM.getDocument", {"depth": 0})["root"]["nodeId"]
    node = driver.execute_cdp_cmd("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
    assert node, f"no element {selector}"
    fonts = driver.execute_cdp_cmd("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
    return [font["familyName"] for font in fonts if font["glyphCount"] > 0]


@pytest.mark.parametrize("page", ["book/index", next(page for page in CHAPTER_PAGES if "masked" in page)])
def test_chinese_text_is_drawn_with_a_cjk_font(browser, site, page):
    _open(browser, f"{site}/zh/{page}.html")
    title = browser.execute_script("return document.querySelector('main section h1').textContent")
    assert re.search(r"[\u4e00-\u9fff]", title), f"{page}: the title is not Chinese: {title!r}"
    fonts = _platform_fonts(browser, "main section h1")
    assert any(name in font for font in fonts for name in CJK_FONTS), f"{page}: drawn with {fonts}"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOTS / f"zh-{Path(page).name}.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000


def _set_mode(driver, mode: str) -> None:
    """What the theme's light/dark switch stores (pydata-sphinx-theme: `mode` and `theme`)."""
    driver.execute_script(
        "localStorage.setItem('mode', arguments[0]); localStorage.setItem('theme', arguments[0]);",
        mode)


def test_screenshot_and_dark_mode(browser, site):
    page = _chapter_with_figure()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    _open(browser, f"{site}/{page}.html")
    _set_mode(browser, "light")
    _open(browser, f"{site}/{page}.html")
    figure = "document.querySelector('.cell_output img')"
    browser.execute_script(f"{figure}.scrollIntoView({{block: 'center'}});")
    light = SCREENSHOTS / f"{Path(page).name}.png"
    assert browser.save_screenshot(str(light)) and light.stat().st_size > 10_000

    _set_mode(browser, "dark")
    _open(browser, f"{site}/{page}.html")
    state = browser.execute_script(f"""
        {figure}.scrollIntoView({{block: 'center'}});
        return {{theme: document.documentElement.dataset.theme,
                page: getComputedStyle(document.body).backgroundColor,
                figure: getComputedStyle({figure}).backgroundColor,
                filter: getComputedStyle({figure}).filter}};""")
    dark = SCREENSHOTS / f"{Path(page).name}-dark.png"
    assert browser.save_screenshot(str(dark)) and dark.stat().st_size > 10_000
    _set_mode(browser, "light")
    assert state["theme"] == "dark", state
    assert state["page"] != WHITE, f"the theme's dark mode did not darken the page: {state}"
    assert state["figure"] == WHITE, f"figures lose their white background in dark mode: {state}"
    assert state["filter"] == "none", f"figures are dimmed in dark mode: {state}"


def test_print_keeps_figures_whole(browser, site):
    page = _chapter_with_figure()
    _open(browser, f"{site}/{page}.html")
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    try:
        styles = browser.execute_script("""
            const width = document.documentElement.clientWidth;
            return Array.from(document.querySelectorAll('.cell_output img')).map(img => {
              const style = getComputedStyle(img), box = img.getBoundingClientRect();
              return {src: img.src, maxWidth: style.maxWidth, breakInside: style.breakInside,
                      left: box.left, right: box.right, width: width};
            });""")
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})
    assert styles, f"{page}: no figure"
    for style in styles:
        assert style["maxWidth"] == "100%", style
        assert style["breakInside"] == "avoid", style
        assert style["left"] >= 0 and style["right"] <= style["width"] + 1, f"figure cut: {style}"


@pytest.mark.parametrize("edition", EDITIONS)
def test_the_api_page_names_the_version_it_documents(edition):
    import attention_book

    text = _soup("book/api", edition).get_text(" ")
    assert re.search(rf"(?:version {re.escape(attention_book.__version__)}\b|{re.escape(attention_book.__version__)} 版)",
                     text), f"the API page does not name version {attention_book.__version__}"
