"""The reading time under each chapter's title (tools/book_reading.py): what it counts on a
page, and that its rates fit what learners fresh from the notes measured (within 25 %)."""

from __future__ import annotations

import pytest
from book_reading import CALIBRATION, LABELS, MainLine, main_line

PAGE = """
<article class="bd-article">
  <h1>A chapter</h1>
  <p>Two words.</p>
  <div class="math notranslate nohighlight">\\[ a = b \\]</div>
  <figure><img src="a.png" alt="a"><figcaption>A caption of five words</figcaption></figure>
  <div class="cell"><div class="cell_input"><pre>x = 1
y = 2</pre></div>
    <div class="cell_output"><img src="b.png" alt="b"></div></div>
  <table><tr><td>one</td></tr></table>
  <details><summary>Folded</summary><div class="math">\\[ c \\]</div><figure></figure>
    <pre>hidden = 1</pre><table></table></details>
  <div class="cell tag_hide-cell"><div class="cell_input"><pre>z = 3</pre></div></div>
</article>
"""


def test_what_the_main_line_counts():
    count = main_line(PAGE)
    assert (count.code_lines, count.equations, count.figures, count.tables) == (2, 1, 2, 1)
    # "A chapter", "Two words.", the caption's five words, the table's "one".
    assert (count.words, count.characters) == (10, 0)


def test_the_minutes_add_every_part():
    count = MainLine(words=130, characters=260, code_lines=8, equations=2, figures=1, tables=3)
    assert count.minutes == 1 + 1 + 1 + 2 + 4 + 3
    assert MainLine(0, 0, 0).minutes == 1  # never "0 min"


@pytest.mark.parametrize("chapter", sorted(CALIBRATION))
def test_the_rates_fit_the_learners_reads(chapter):
    (words, code_lines, equations, figures, tables), measured = CALIBRATION[chapter]
    stated = MainLine(words, 0, code_lines, equations, figures, tables).minutes
    assert 0.75 * measured <= stated <= 1.25 * measured, f"{chapter}: {stated} against {measured}"


def test_both_editions_label_it():
    assert sorted(LABELS) == ["en", "zh_CN"]
    assert all("{minutes}" in label for label in LABELS.values())
