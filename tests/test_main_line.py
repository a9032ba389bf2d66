"""The main line of every chapter, on the built book: what a reader sees before unfolding
anything stays within the budget of the learner's path (at most 2,500 words and 250 lines of
code a chapter, 22,000 words for chapters 1 to 10 together), and each chapter opens with the
reading time of that main line, in the language of its edition.

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
from book_reading import LABELS, _without_highlighting, main_line  # tools/book_reading.py
from chapters import SOURCES, ids

ROOT = Path(__file__).resolve().parent.parent
HTML = Path(os.environ.get("ATTENTION_BOOK_BUILD", ROOT / "_build")).resolve() / "html"
WORDS, CODE_LINES, WORDS_OF_THE_TEN = 2500, 250, 22_000


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
    # Computed, not typed: 120 words, 240 Chinese characters and 12 lines of code a minute.
    expected = math.ceil(count.words / 120 + count.characters / 240 + count.code_lines / 12)
    assert count.minutes == max(1, expected)
    numbers = [int(n) for n in re.findall(r"\d+", line["title"])]
    assert numbers == [count.words, count.characters, count.code_lines]
