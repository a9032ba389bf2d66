"""Sphinx extension of the book: every chapter opens with the reading time of its main line.

The main line is what a chapter shows with nothing unfolded: its prose and its visible code,
without dropdowns, folded cells, solutions and hidden outputs. The reading time is computed
from the page as built, never typed: English words at 130 a minute (Chinese characters at
260), visible lines of code at 8 a minute, a minute for each displayed equation and each
table, four for each figure. The rates are fitted to what learners fresh from the notes
measured on seven chapters (37 to 60 minutes a chapter; `CALIBRATION`): the model is within
20 % of each. The same count (`main_line`) checks each chapter's budget in
tests/test_main_line.py. Loaded through `sphinx.local_extensions` in `_config.yml`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from bs4 import BeautifulSoup, Tag

# What a reader does not see before unfolding it (the selectors of the book's main-line count).
HIDDEN = ["details", ".solution", ".dropdown", ".toggle", ".tag_hide-input .cell_input",
          ".tag_hide-cell", ".tag_hide-output .cell_output", ".tag_remove-input", ".tag_remove-cell"]
NOT_PROSE = ".math, mjx-container, script, .headerlink, .reading-time"
WORD = re.compile(r"[A-Za-z0-9_]+")
CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
PER_MINUTE = {"words": 130, "characters": 260, "code lines": 8}
MINUTES_EACH = {"equations": 1, "tables": 1, "figures": 4}
# Learners' reads of the first pass: (words, code lines, equations, figures, tables) of the
# main line as they read it, and the minutes they took.
CALIBRATION = {
    "01_what_is_attention": ((2156, 92, 4, 3, 1), 37),
    "03_why_scale": ((2452, 104, 5, 5, 0), 60),
    "05_masked_attention": ((2209, 177, 2, 3, 1), 57.5),
    "06_multihead_attention": ((2272, 179, 4, 2, 0), 60),
    "09_efficient_attention": ((2082, 78, 4, 5, 0), 60),
    "10_generating_text": ((2126, 221, 4, 2, 0), 60),
    "11_a_real_model": ((2463, 252, 2, 2, 0), 52.5),
}
CHAPTERS = "book/chapters/"
LABELS = {  # the line under the title, in the page's language
    "en": "Reading time: about {minutes} min for the main line (folded cells and dropdowns "
          "are extra).",
    "zh_CN": "阅读时间：主线约 {minutes} 分钟（折叠的单元和下拉块另计）。",
}
TITLES = {  # its tooltip: what the reading time was computed from
    "en": "{words} words, {characters} Chinese characters, {code_lines} lines of code, "
          "{equations} equations, {figures} figures and {tables} tables in view",
    "zh_CN": "可见部分：{words} 个英文词、{characters} 个汉字、{code_lines} 行代码、"
             "{equations} 个公式、{figures} 幅图、{tables} 张表",
}


@dataclass(frozen=True)
class MainLine:
    words: int  # English words (and numbers) of the visible prose
    characters: int  # Chinese characters of the visible prose
    code_lines: int  # non-blank lines of visible code
    equations: int = 0  # displayed equations
    figures: int = 0  # figures, and images outside a figure
    tables: int = 0

    @property
    def minutes(self) -> int:
        total = (self.words / PER_MINUTE["words"] + self.characters / PER_MINUTE["characters"]
                 + self.code_lines / PER_MINUTE["code lines"]
                 + self.equations * MINUTES_EACH["equations"]
                 + self.tables * MINUTES_EACH["tables"]
                 + self.figures * MINUTES_EACH["figures"])
        return max(1, math.ceil(total))


def _without_highlighting(html: str) -> str:
    """The HTML with the syntax highlighting inside <pre> taken out: the same text, a far smaller
    tree to parse (one <span> per token)."""
    return _PRE.sub(lambda m: m[1] + _SPAN.sub("", m[2]) + m[3], html)


_PRE = re.compile(r"(<pre\b[^>]*>)(.*?)(</pre>)", re.S)
_SPAN = re.compile(r"</?span\b[^>]*>")


def visible(html: str | Tag) -> BeautifulSoup:
    """What shows of a page (its article, or its body) with nothing unfolded."""
    soup = BeautifulSoup(_without_highlighting(str(html)), "html.parser")
    for selector in HIDDEN:
        for element in soup.select(selector):
            element.decompose()
    return soup


def main_line(html: str | Tag) -> MainLine:
    """Count what shows of a chapter (its article, or its body) with nothing unfolded."""
    soup = visible(html)
    equations = len(soup.select("div.math"))
    figures = len(soup.select("figure")) + sum(1 for img in soup.select("img")
                                               if not img.find_parent("figure"))
    tables = len(soup.select("table"))
    for element in soup.select(NOT_PROSE):
        element.decompose()
    code = sum(1 for pre in soup.select(".cell_input pre, div.highlight pre")
               if not pre.find_parent(class_="cell_output")
               for line in pre.get_text().splitlines() if line.strip())
    for element in soup.select(".cell, div.highlight, pre"):
        element.decompose()
    text = soup.get_text(" ")
    return MainLine(len(WORD.findall(text)), len(CJK.findall(text)), code, equations, figures,
                    tables)


def _add_reading_time(app, pagename, templatename, context, doctree):
    if not pagename.startswith(CHAPTERS) or "body" not in context:
        return
    body = context["body"]
    count = main_line(body)
    label = LABELS.get(app.config.language or "en", LABELS["en"]).format(minutes=count.minutes)
    title = TITLES.get(app.config.language or "en", TITLES["en"]).format(
        words=count.words, characters=count.characters, code_lines=count.code_lines,
        equations=count.equations, figures=count.figures, tables=count.tables)
    line = f'<p class="reading-time" title="{title}">{label}</p>'
    end = body.find("</h1>")
    if end >= 0:
        context["body"] = body[: end + 5] + "\n" + line + body[end + 5:]


def setup(app):
    app.connect("html-page-context", _add_reading_time)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
