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
# The asserts each chapter held before its main line was shortened the second time (386 in
# all): folding a check keeps it, so no chapter may hold fewer.
ASSERTS_BEFORE_THE_SECOND_PASS = {
    "01": 29, "02": 15, "03": 37, "04": 39, "05": 45, "06": 39,
    "07": 66, "08": 28, "09": 39, "10": 33, "11": 16,
}


def _code(path) -> list[str]:
    notebook = nbformat.read(path, as_version=4)
    return [cell.source for cell in notebook.cells if cell.cell_type == "code"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_no_assert_was_lost(path):
    count = sum(len(ASSERT.findall(source)) for source in _code(path))
    assert count >= ASSERTS_BEFORE_THE_SECOND_PASS[path.name[:2]], f"{path.name}: {count} asserts"


def test_every_chapter_has_a_floor():
    assert sorted(ASSERTS_BEFORE_THE_SECOND_PASS) == sorted(path.name[:2] for path in NOTEBOOKS)
    assert sum(ASSERTS_BEFORE_THE_SECOND_PASS.values()) == 386


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
