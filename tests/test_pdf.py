"""The book on paper: the PDF of each edition, as `make pdf` wrote it into the HTML site.

Needs the built book and both PDFs (``make pdf``, which builds the HTML first) and Debian's
poppler-utils (pdfinfo, pdffonts, pdftotext, pdfimages, pdftoppm); ``make test-pdf`` provides
them, then runs this file. Run alone (``make unit`` runs every file of tests/) it is skipped:
``make test-pdf`` sets ATTENTION_BOOK_TEST_PDF=1.

For each edition: a book-length PDF in the site, where every HTML page of both editions links
it; every font embedded, a CJK font for the Chinese; the title of every page of ``_toc.yml``
in the text, as each edition's HTML titles it; every figure of the HTML as an image; the
XeLaTeX log free of missing characters, undefined references and text pushed out of the page;
and pages rendered as images look like pages: a chapter's first page has text, a page with a
figure has the figure's colours. The rendered pages are saved to ``_build/pdf-pages/``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest
import yaml
from bs4 import BeautifulSoup
from chapters import header_links

if os.environ.get("ATTENTION_BOOK_TEST_PDF") != "1":
    pytest.skip("checks the built PDFs: run by `make test-pdf`", allow_module_level=True)

from book_i18n import CATALOG, INTERFACE_LABELS, PDF_NAMES  # tools/book_i18n.py  # noqa: E402
from pdf import EDITIONS, SITE_FOLDERS, latex_folder, problems_in_log  # tools/pdf.py  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("ATTENTION_BOOK_BUILD", ROOT / "_build")).resolve()
HTML = BUILD / "html"
PAGES = BUILD / "pdf-pages"  # the rendered pages, for a reader to look at
MIN_PAGES = 100
CJK = re.compile(r"[\u4e00-\u9fff]")
CJK_FONT = re.compile(r"CJK|WenQuanYi|SourceHan|Droid", re.I)
POPPLER = ("pdfinfo", "pdffonts", "pdftotext", "pdfimages", "pdftoppm")


def _toc_files(node) -> list[str]:
    files = []
    if isinstance(node, dict):
        files += [node[key] for key in ("root", "file") if key in node]
        for key in ("parts", "chapters", "sections"):
            for child in node.get(key) or []:
                files += _toc_files(child)
    return files


TOC_PAGES = [Path(f).with_suffix("").as_posix() for f in _toc_files(yaml.safe_load((ROOT / "_toc.yml").read_text()))]


def _pdf(edition: str) -> Path:
    return HTML / SITE_FOLDERS[edition] / PDF_NAMES[EDITIONS[edition]]


def _run(*command: str) -> str:
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module", autouse=True)
def _poppler_and_pdfs():
    missing = [tool for tool in POPPLER if shutil.which(tool) is None]
    assert not missing, f"install Debian's poppler-utils (`make texlive` does): {missing} missing"
    for edition in EDITIONS:
        assert _pdf(edition).is_file(), f"{_pdf(edition)} is missing: run `make pdf`"


@cache
def _text(edition: str, first: int = 1, last: int = 0) -> str:
    pages = ["-f", str(first)] + (["-l", str(last)] if last else [])
    return _run("pdftotext", "-enc", "UTF-8", *pages, str(_pdf(edition)), "-")


@cache
def _page_count(edition: str) -> int:
    return int(re.search(r"^Pages:\s+(\d+)", _run("pdfinfo", str(_pdf(edition))), re.M)[1])


@cache
def _images(edition: str) -> list[tuple[int, str]]:
    """(page, type) of every image object; type is "image", or "smask" for a transparency mask."""
    rows = _run("pdfimages", "-list", str(_pdf(edition))).splitlines()[2:]
    return [(int(row.split()[0]), row.split()[2]) for row in rows]


def _squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _html_title(page: str, edition: str) -> str:
    soup = BeautifulSoup((HTML / SITE_FOLDERS[edition] / f"{page}.html").read_text(encoding="utf-8"), "html.parser")
    heading = soup.select_one("main section h1") or soup.select_one("main h1")
    for permalink in heading.select("a.headerlink"):
        permalink.decompose()
    return heading.get_text(" ", strip=True)


def _site_pages(edition: str) -> list[Path]:
    root = HTML / SITE_FOLDERS[edition]
    pages = [path for path in root.rglob("*.html") if "_static" not in path.parts]
    if edition == "en":
        other = SITE_FOLDERS["zh"].strip("/")
        pages = [path for path in pages if path.relative_to(HTML).parts[0] != other]
    return sorted(pages)


# --- the files ---------------------------------------------------------------------------------
@pytest.mark.parametrize("edition", EDITIONS)
def test_the_pdf_is_a_book(edition):
    assert _page_count(edition) >= MIN_PAGES, f"{_pdf(edition)}: {_page_count(edition)} pages"


@pytest.mark.parametrize("edition", EDITIONS)
def test_every_html_page_links_both_pdfs(edition):
    """A plain relative link to each edition's PDF in every page's header, labelled in the
    page's language."""
    checked = 0
    for path in _site_pages(edition):
        links = header_links(path, "a.book-pdf-link[href]")
        if links is None:  # the redirect index.html
            continue
        page = path.relative_to(HTML)
        targets = {(path.parent / link["href"]).resolve() for link in links}
        assert targets == {_pdf(other).resolve() for other in EDITIONS}, f"{page}: {links}"
        for link in links:
            assert not re.match(r"^(https?:)?//|/", link["href"]), f"{page}: not relative: {link}"
            label = link.get_text(strip=True) + link.get("title", "")
            assert bool(CJK.search(label)) == (edition == "zh"), f"{page}: label {label!r}"
        checked += 1
    assert checked >= len(TOC_PAGES), checked


# --- fonts and text ----------------------------------------------------------------------------
@pytest.mark.parametrize("edition", EDITIONS)
def test_every_font_is_embedded(edition):
    rows = _run("pdffonts", str(_pdf(edition))).splitlines()[2:]
    assert rows, "no fonts"
    # columns: name type... encoding emb sub uni object ID; the name may contain no spaces
    not_embedded = [row for row in rows if row.split()[-5] != "yes"]
    assert not not_embedded, "fonts not embedded:\n" + "\n".join(not_embedded)
    names = [row.split()[0] for row in rows]
    if edition == "zh":
        assert any(CJK_FONT.search(name) for name in names), f"no CJK font among {names}"


@pytest.mark.parametrize("edition", EDITIONS)
def test_the_text_is_in_the_language_of_the_edition(edition):
    chinese = len(CJK.findall(_text(edition)))
    if edition == "zh":
        assert chinese > 50_000, f"only {chinese} Chinese characters"
    else:  # the English edition quotes the notes' Chinese terms, no more
        assert 0 < chinese < 2_000, f"{chinese} Chinese characters"


@pytest.mark.parametrize("edition", EDITIONS)
def test_every_page_of_the_toc_is_in_the_pdf(edition):
    """Every chapter and reference page, under the title its HTML page has in the edition."""
    text = _squeeze(_text(edition))
    missing = [title for title in (_html_title(page, edition) for page in TOC_PAGES)
               if _squeeze(title) not in text]
    assert not missing, f"titles not found in {_pdf(edition).name}: {missing}"


def _label(kind: str, edition: str) -> str:
    """"Chapter {number}" or "Appendix {number}", in the edition's language (tools/book_i18n.py)."""
    english = f"{kind} {{number}}"
    return INTERFACE_LABELS["zh_CN"][CATALOG][english] if edition == "zh" else english


@pytest.mark.parametrize("edition", EDITIONS)
def test_chapters_are_numbered_and_the_pages_after_them_are_appendices(edition):
    """Each chapter opens under "Chapter 1", "Chapter 2", ... (第 1 章 ...), in the order of
    _toc.yml; the pages after the last chapter under "Appendix A", "Appendix B", ..."""
    text = _squeeze(_text(edition))
    chapters = [page for page in TOC_PAGES if page.startswith("book/chapters/")]
    after = TOC_PAGES[TOC_PAGES.index(chapters[-1]) + 1:]
    expected = [_label("Chapter", edition).format(number=number) + _html_title(page, edition)
                for number, page in enumerate(chapters, 1)]
    expected += [_label("Appendix", edition).format(number=chr(ord("A") + number)) + _html_title(page, edition)
                 for number, page in enumerate(after)]
    missing = [heading for heading in expected if _squeeze(heading) not in text]
    assert not missing, f"headings not found in {_pdf(edition).name}: {missing}"


@pytest.mark.parametrize("edition", EDITIONS)
def test_every_figure_of_the_html_is_in_the_pdf(edition):
    figures = {img["src"].rsplit("/", 1)[-1]
               for page in TOC_PAGES
               for img in BeautifulSoup((HTML / SITE_FOLDERS[edition] / f"{page}.html").read_text(encoding="utf-8"),
                                        "html.parser").select("main img")
               if "_images/" in img.get("src", "")}
    images = [page for page, kind in _images(edition) if kind == "image"]
    assert figures, "the HTML has no figures"
    assert len(images) >= len(figures), f"{len(images)} images in the PDF, {len(figures)} figures in the HTML"


@pytest.mark.parametrize("edition", EDITIONS)
def test_a_figure_a_reader_can_move_prints_nothing_on_paper(edition):
    """Its HTML output has no place on paper, nor its text form (``<interactive figure: ...>``):
    the still image of the next cell stands for it (``nb_mime_priority_overrides``)."""
    moving = sum(len(BeautifulSoup((HTML / SITE_FOLDERS[edition] / f"{page}.html").read_text(encoding="utf-8"),
                                   "html.parser").select("main .ab-interactive"))
                 for page in TOC_PAGES)
    assert moving >= 5, f"only {moving} figures a reader can move in the HTML"
    printed = re.findall(r"<interactivefigure:\d+statesof[^>]*>", _squeeze(_text(edition)))
    assert not printed, f"printed in {_pdf(edition).name}: {printed}"


@pytest.mark.parametrize("edition", EDITIONS)
def test_the_latex_log_reports_nothing_missing(edition):
    logs = list(latex_folder(BUILD, edition).glob("*.log"))
    assert len(logs) == 1, f"expected the one XeLaTeX log in {latex_folder(BUILD, edition)}: {logs}"
    log = logs[0].read_text(encoding="utf-8", errors="replace")
    assert "Output written on" in log, f"{logs[0]}: XeLaTeX wrote no PDF"
    assert "Missing character" not in log
    assert not problems_in_log(log), problems_in_log(log)


# --- pages as images ---------------------------------------------------------------------------
def _render(edition: str, page: int):
    """Page `page` as an RGB image (75 dpi), also saved as a PNG to _build/pdf-pages/."""
    from PIL import Image

    PAGES.mkdir(parents=True, exist_ok=True)
    stem = PAGES / f"{edition}-{page:03d}"
    subprocess.run(["pdftoppm", "-r", "75", "-png", "-singlefile", "-f", str(page), "-l", str(page),
                    str(_pdf(edition)), str(stem)], check=True)
    return Image.open(f"{stem}.png").convert("RGB")


def _ink(image) -> "numpy.ndarray":
    """Which pixels are not white, as a (height, width) boolean array."""
    import numpy

    return numpy.asarray(image).min(axis=2) < 200


def _figure_band(edition: str, page: int, image) -> tuple[int, float]:
    """The tallest band of inked rows with no text on them, in pixels, and its share of coloured
    pixels: a raster figure, whose labels are pixels too, where code and text have words."""
    import numpy

    words = BeautifulSoup(_run("pdftotext", "-bbox", "-f", str(page), "-l", str(page), str(_pdf(edition)), "-"),
                          "html.parser")
    scale = image.height / float(words.find("page")["height"])
    covered = numpy.zeros(image.height, bool)
    for word in words.find_all("word"):
        covered[int(float(word["ymin"]) * scale):int(float(word["ymax"]) * scale) + 2] = True
    rows = (_ink(image).mean(axis=1) > 0.002) & ~covered
    best, start, gap = (0, 0), None, 0
    for row, inked in enumerate([*rows, False, False, False, False]):
        if inked:
            start, gap = (row if start is None else start), 0
        elif start is not None:
            gap += 1
            if gap > 3:  # a band may have blank rows inside, not more than 3
                best = max(best, (row - gap + 1 - start, start))
                start, gap = None, 0
    height, top = best
    band = numpy.asarray(image)[top:top + height].astype(int)
    colour = float(((band.max(axis=2) - band.min(axis=2)) > 80).mean()) if height else 0.0
    return height, colour


def _first_page_of_chapter_1(edition: str) -> int:
    """The page that opens chapter 1: its heading, "Chapter 1" (第 1 章) above the title."""
    label = _label("Chapter", edition)
    title = _html_title(next(page for page in TOC_PAGES if "/chapters/" in page), edition)
    heading = _squeeze(label.format(number=1) + title)
    return next(number for number in range(1, _page_count(edition) + 1)
                if heading in _squeeze(_text(edition, number, number)))


@pytest.mark.parametrize("edition", EDITIONS)
def test_a_chapter_page_has_text(edition):
    page = _first_page_of_chapter_1(edition)
    ink = float(_ink(_render(edition, page)).mean())
    text = _text(edition, page, page)
    assert 0.01 < ink < 0.5, f"page {page}: {ink:.1%} of the page inked"
    assert len(_squeeze(text)) > 500, f"page {page}: {text!r}"
    if edition == "zh":
        assert len(CJK.findall(text)) > 200, f"page {page}: {text!r}"


@pytest.mark.parametrize("edition", EDITIONS)
def test_a_page_with_a_figure_shows_it(edition):
    """The first page with an image has text, and a figure: at least 3 cm of inked rows with no
    word of the text on them, in colour."""
    page = min(page for page, kind in _images(edition) if kind == "image")
    image = _render(edition, page)
    height, colour = _figure_band(edition, page, image)
    assert height > 3 / 2.54 * 75, f"page {page}: no figure, the tallest band without text is {height} px"
    assert colour > 0.01, f"page {page}: the figure has {colour:.2%} of its pixels in colour"
    assert len(_squeeze(_text(edition, page, page))) > 100, f"page {page} has no text"
