"""The main line of every chapter, on the built book: what a reader sees before unfolding
anything stays within the budget of the learner's path, and each chapter opens with the
reading time of that main line, in the language of its edition.

A chapter in the second pass's form (`SECOND_PASS`: the idea in bare code, the package
folded; CONTRIBUTING.md) has at most 1,600 words, 100 lines of visible code and 4 visible
verdicts (what a cell whose code folds shows, text or figure: a figure shows the one line
that draws it), no visible code or output line wider than 88 characters and no words about
checking. The others keep the first pass's budget (2,500 words and 250 lines of code) until
they are rewritten; chapters 1 to 10 together, 22,000 words.

Needs the built book (``make build``); ``make test-browser`` runs this file after it.
"""

from __future__ import annotations

import functools
import math
import os
import re
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from book_reading import LABELS, _without_highlighting, main_line, visible  # tools/book_reading.py
from chapters import SOURCES, ids

ROOT = Path(__file__).resolve().parent.parent
HTML = Path(os.environ.get("ATTENTION_BOOK_BUILD", ROOT / "_build")).resolve() / "html"
WORDS, CODE_LINES, WORDS_OF_THE_TEN = 2500, 250, 22_000
# The chapters (file stems) in the learner's path's second form.
SECOND_PASS = {"01_what_is_attention", "02_scaled_dot_product_attention", "03_why_scale",
               "04_softmax_gradient", "05_masked_attention", "06_multihead_attention",
               "07_bert_self_attention", "08_positions", "09_efficient_attention",
               "10_generating_text", "11_a_real_model"}
WORDS_2, CODE_LINES_2, VERDICTS_2, WIDTH = 1600, 100, 4, 88
TEST_SPEAK = re.compile(r"\b(asserted|asserts|verdicts?|nbval|the folded cells?)\b", re.I)


@functools.cache
def _article(source: Path, edition: str = ""):
    page = HTML / edition / "book" / "chapters" / f"{source.stem}.html"
    html = _without_highlighting(page.read_text())  # the same text, parsed faster
    return BeautifulSoup(html, "html.parser").select_one("article.bd-article")


@functools.cache
def _count(source: Path, edition: str = ""):
    return main_line(_article(source, edition))


@pytest.mark.parametrize("source", SOURCES, ids=ids(SOURCES))
def test_the_main_line_is_within_its_budget(source):
    count = _count(source)
    assert count.words <= WORDS, f"{source.stem}: {count.words} words in view"
    assert count.code_lines <= CODE_LINES, f"{source.stem}: {count.code_lines} lines of code in view"


@pytest.mark.parametrize("source", [s for s in SOURCES if s.stem in SECOND_PASS],
                         ids=ids([s for s in SOURCES if s.stem in SECOND_PASS]))
def test_a_chapter_of_the_second_pass_keeps_its_budget(source):
    count = _count(source)
    assert count.words <= WORDS_2, f"{source.stem}: {count.words} words in view"
    assert count.code_lines <= CODE_LINES_2, f"{source.stem}: {count.code_lines} lines of code"
    article = visible(_article(source))
    # A verdict is what a cell whose code folds shows: its text, or a figure it draws.
    verdicts = [cell for cell in article.select("div.cell.tag_hide-input")
                if cell.select(".cell_output")]
    assert len(verdicts) <= VERDICTS_2, f"{source.stem}: {len(verdicts)} visible verdicts"
    lines = [line for pre in article.select(".cell pre, div.highlight pre")
             for line in pre.get_text().splitlines()]
    wide = [line for line in lines if len(line) > WIDTH]
    assert not wide, f"{source.stem}: {len(wide)} lines wider than {WIDTH}, such as {wide[0]!r}"
    for element in article.select(".cell, div.highlight, pre, .math, script"):
        element.decompose()
    speak = TEST_SPEAK.findall(article.get_text(" "))
    assert not speak, f"{source.stem}: {speak}"


def test_every_chapter_of_the_second_pass_exists():
    assert SECOND_PASS <= {source.stem for source in SOURCES}


def test_the_ten_chapters_of_the_notes_and_beyond_read_in_a_weekend():
    words = sum(_count(source).words for source in SOURCES if int(source.stem[:2]) <= 10)
    assert words <= WORDS_OF_THE_TEN


@pytest.mark.parametrize("edition, language", [("", "en"), ("zh", "zh_CN")])
@pytest.mark.parametrize("source", SOURCES, ids=ids(SOURCES))
def test_each_chapter_opens_with_the_reading_time_of_its_main_line(source, edition, language):
    article = _article(source, edition)
    title = article.find("h1")
    line = title.find_next_sibling()
    assert line is not None and "reading-time" in line.get("class", []), f"{source.stem}: no reading time"
    count = _count(source, edition)
    assert line.get_text() == LABELS[language].format(minutes=count.minutes)
    # Computed, not typed: 130 words (260 Chinese characters) and 8 lines of code a minute, a
    # minute for each displayed equation and table, four for each figure.
    expected = math.ceil(count.words / 130 + count.characters / 260 + count.code_lines / 8
                         + count.equations + count.tables + 4 * count.figures)
    assert count.minutes == max(1, expected)
    numbers = [int(n) for n in re.findall(r"\d+", line["title"])]
    assert numbers == [count.words, count.characters, count.code_lines, count.equations,
                       count.figures, count.tables]
