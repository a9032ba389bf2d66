"""The learner's path, in the chapter sources: every chapter opens with its "notes ↔ this
chapter" box and ends with a recap of its core code, no title shows a raw `d_k`, and folding
the checks removed none of them. (The main line's budget is measured on the built book, in
tests/test_main_line.py.)"""

from __future__ import annotations

import re

import nbformat
import pytest
from chapters import NOTEBOOKS, SOURCES, ids

ASSERT = re.compile(r"^\s*assert\b", re.M)
NOTES_BOX = re.compile(r"^```\{admonition\} The notes ↔ this chapter\n:class: notes-box\n", re.M)
# Chapters 1 to 10 held 284 asserts in their code cells before their main lines were shortened.
ASSERTS_BEFORE_THE_LEARNERS_PATH = 284


def _code(path) -> list[str]:
    notebook = nbformat.read(path, as_version=4)
    return [cell.source for cell in notebook.cells if cell.cell_type == "code"]


def test_no_assert_was_lost():
    first_ten = [path for path in NOTEBOOKS if int(path.name[:2]) <= 10]
    count = sum(len(ASSERT.findall(source)) for path in first_ten for source in _code(path))
    assert count >= ASSERTS_BEFORE_THE_LEARNERS_PATH


@pytest.mark.parametrize("path", SOURCES, ids=ids(SOURCES))
def test_the_chapter_opens_with_the_notes_box(path):
    text = path.read_text()
    match = NOTES_BOX.search(text)
    assert match, f"{path.name}: no ```{{admonition}} The notes ↔ this chapter with :class: notes-box"
    before = text[: match.start()]
    assert before.count("\n## ") == 0, f"{path.name}: the notes box must come before the first section"


@pytest.mark.parametrize("path", SOURCES, ids=ids(SOURCES))
def test_no_chapter_title_shows_raw_markup(path):
    """The title is also the sidebar's entry, the browser's tab and every link's text: plain text."""
    (title,) = re.findall(r"^# (.+)$", path.read_text(), re.M)[:1]
    assert not re.search(r"[_$\\^{}]", title), f"{path.name}: {title}"
