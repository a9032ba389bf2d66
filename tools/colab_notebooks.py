"""The Colab notebooks of both editions: each chapter's notebook in plain Markdown, for Colab.

Colab renders CommonMark and MathJax, nothing of MyST. Each edition gets its own notebook of
every chapter, written by this one generator from the chapter's executed notebook
`book/chapters/NN_name.ipynb` (the jupytext pair, with MyST: the book's source):

- English: `book/chapters/en/NN_name.ipynb`, the pair's prose made plain Markdown;
- Chinese: `book/chapters/zh/NN_name.ipynb`, the pair's prose translated first, then made plain.

Code cells, with their outputs and metadata, are copied unchanged in both, so one run of the
pair (`make nbval`) is a run of all three.

The Chinese prose is made from two sources and nothing else: the English
notebook `book/chapters/NN_name.ipynb` and the chapter's translation catalog
`locales/zh_CN/LC_MESSAGES/book/chapters/NN_name.po`. Code cells, with their outputs and
metadata, are copied unchanged, so one run of the English notebook (`make nbval`) is a run of
both. In a markdown cell every message of the catalog, a paragraph, a heading, a list item, a
table cell or a directive's title, exactly as the gettext builder cut it from that cell (its
line breaks read as spaces), is replaced by its translation; markup outside the messages (list
markers, directive fences, labels, display math, code in fences) is kept. A message of the
catalog that is found in no cell is an error, and so is an English sentence left over.

Then the prose of either edition is made plain Markdown (`for_colab`): notes, dropdowns,
exercises and solutions, equation numbers, citations and figure captions are written as that
edition's HTML page shows them, with the book's own numbers; references to sections link to
the published page; each caption gets a cell of its own right after its figure; a moving
figure gets a line saying that it moves on the web page; a cell at the end lists what the
chapter cites, as the bibliography page does.

    python tools/colab_notebooks.py            write every Colab notebook of both editions
    python tools/colab_notebooks.py --check    exit 1 when one differs from what it would write
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ROOT / "book" / "chapters"
FOLDERS = {"en": CHAPTERS / "en", "zh": CHAPTERS / "zh"}  # book/chapters/<edition>/NN_name.ipynb
CATALOGS = ROOT / "locales" / "zh_CN" / "LC_MESSAGES" / "book" / "chapters"

# Where a message may stand: a whole line after a block marker, a table cell, a directive's title.
_LINE = r"(?:^|\n)[ \t]*(?:>[ \t]*)*(?:[-*+][ \t]+|\d+\.[ \t]+|#{1,6}[ \t]+)?", r"[ \t]*(?=\n|$)"
_CELL = r"\|[ \t]*", r"[ \t]*(?=\|)"
_TITLE = r"(?:^|\n)[ \t]*(?:`{3,}|:{3,})\{[\w:-]+\}[ \t]+", r"[ \t]*(?=\n|$)"
PLACES = (_LINE, _CELL, _TITLE)


class TranslationError(ValueError):
    """A chapter's notebook and catalog do not fit together."""


@dataclass(frozen=True)
class Message:
    english: str
    chinese: str

    def pattern(self) -> re.Pattern:
        """The message as it stands in a cell, any run of white space for a space (line breaks)."""
        words = r"\s+".join(re.escape(word) for word in self.english.split())
        return re.compile("|".join(f"(?P<b{i}>{before})(?P<m{i}>{words})(?P<a{i}>{after})"
                                   for i, (before, after) in enumerate(PLACES)))


def messages(po: Path) -> list[Message]:
    """The translated messages of a catalog that have words to translate, longest first."""
    from babel.messages.pofile import read_po

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from translations import has_words  # tools/translations.py

    with po.open("rb") as file:
        catalog = read_po(file)
    found = []
    for message in catalog:
        if not message.id or not has_words(message.id):
            continue
        if message.fuzzy or not message.string:
            raise TranslationError(f"{po.name}: {message.id[:60]!r} is not translated")
        found.append(Message(message.id, message.string))
    return sorted(found, key=lambda m: len(m.english), reverse=True)


def _translate(source: str, message: Message) -> tuple[str, int]:
    pattern = message.pattern()

    def replace(match: re.Match) -> str:
        index = next(i for i in range(len(PLACES)) if match.group(f"m{i}") is not None)
        return match.group(f"b{index}") + message.chinese + match.group(f"a{index}")

    return pattern.subn(replace, source)


def _captions(notebook) -> str:
    """The figure captions of the code cells' metadata: the catalog has them, the prose has not."""
    return "\n".join(json.dumps(cell.metadata.get("mystnb", {}), ensure_ascii=False)
                     for cell in notebook.cells if cell.cell_type == "code")


def chinese(english_path: Path, po: Path):
    """The Chinese notebook of one chapter."""
    english = nbformat.read(english_path, as_version=4)
    notebook = copy.deepcopy(english)
    found = messages(po)
    used = set()
    for cell in notebook.cells:
        if cell.cell_type != "markdown":
            continue
        text = cell.source
        for message in found:
            text, count = _translate(text, message)
            if count:
                used.add(message.english)
        cell.source = text
    captions = _captions(english)
    unused = [m.english for m in found if m.english not in used
              and not all(word in captions for word in m.english.split()[:6])]
    if unused:
        raise TranslationError(
            f"{english_path.name}: {len(unused)} messages of {po.name} are in no markdown cell, "
            f"e.g. {unused[0][:70]!r}: regenerate the catalog (`make translations`)"
        )
    left = _english_left(notebook, found)
    if left:
        raise TranslationError(f"{english_path.name}: English left in a markdown cell: {left[:70]!r}")
    notebook.metadata["language_info"] = {**english.metadata.get("language_info", {})}
    return notebook


def _english_left(notebook, found: list[Message]) -> str | None:
    """A message's English still in the translated prose (a message that failed to match)."""
    prose = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")
    for message in found:
        if len(message.english.split()) >= 4 and message.pattern().search(prose):
            return message.english
    return None


# --- for Colab: the notebook as plain Markdown ------------------------------------------------
# Colab renders CommonMark with MathJax and nothing of MyST: a directive would show as a code
# block, a role as raw text, a label as a stray line. Each is written as the edition's HTML page
# shows it: a note as a quotation, a dropdown or a solution as <details>, an exercise with its
# number, a reference as a link to the section on the published page, an equation reference as
# (n) with \tag{n} on the equation, a citation as (author, year). The numbers are the book's:
# exercises, figures and equations count through the chapters in order, as on the pages.
_FENCE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{(?P<name>[\w-]+)\}[ \t]*(?P<title>.*)$")
_OPTION = re.compile(r"^:([\w-]+):[ \t]*(.*)$")
_ROLE = re.compile(r"\{(ref|eq|cite)\}`([^`]*)`")
_EQUATION = re.compile(r"^\$\$[ \t]*\((?P<label>[\w-]+)\)[ \t]*$", re.M)
_HEADING = re.compile(r"^\((?P<label>[\w-]+)\)=[ \t]*\n+#{1,6}[ \t]+(?P<title>.+)$", re.M)
_BOXES = {"admonition", "note", "tip", "warning", "important", "seealso"}
_CJK = "\u3000-\u303f\u3400-\u9fff\uff00-\uffef“”《》"
_CITE = re.compile(r"\x02cite:([^\x03]*)\x03")  # a citation, placed once its context is known


def _config() -> dict:
    import yaml

    return yaml.safe_load((ROOT / "_config.yml").read_text())


@dataclass(frozen=True)
class Edition:
    """What differs between the editions' notebooks: words, numbers' labels, the site."""

    code: str            # "en" or "zh": the folder book/chapters/<code>/
    site: str            # the published edition's root, ending in "/"
    note: str            # the note under the title; {url} is the chapter's page
    box: str             # a note's title when the directive has none
    figure: str          # a caption's label, "Fig. {n}"
    exercise: str        # "Exercise {n}"
    solution: str        # the <summary> of a solution, "Solution to Exercise {n}"
    equation: str        # a reference to an equation, "({n})"
    page: str            # a reference to a whole page (a chapter), "{title}"
    section: str         # a reference to a section, "{title}"
    moving: str          # the line after a moving figure; {url} is the chapter's page
    references: str      # the heading of the references cell
    cite_sep: str        # between a citation's authors-and-year and the next citation
    cite_open: str
    cite_close: str
    aside: str           # before a citation that stands inside parentheses

    def url(self, page: str, label: str | None = None) -> str:
        return f"{self.site}{page}.html" + (f"#{label}" if label else "")


def _editions() -> dict[str, Edition]:
    site = _config()["sphinx"]["config"]["book_site_url"].rstrip("/") + "/"
    return {
        "en": Edition(
            "en", site,
            note=("> This notebook is made from the same source as the chapter's [web page]({url}), "
                  "for running in Colab. Cells folded on the page (checks, plots) are shown here; "
                  "the figures that move can be moved on the web page only; each exercise's "
                  "solution is in a folded block."),
            box="Note", figure="Fig. {n}", exercise="Exercise {n}",
            solution="Solution to Exercise {n}", equation="eq. ({n})", page="{title}",
            section="{title}",
            moving=("> The next figure moves on the chapter's [web page]({url}): there its controls "
                    "redraw it. Colab does not draw it; the still image after it is its first state."),
            references="References", cite_sep="; ", cite_open="(", cite_close=")", aside=", "),
        "zh": Edition(
            "zh", site + "zh/",
            note=("> 这个 notebook 与本章的[网页]({url})由同一份源文件生成，供在 Colab 中运行。网页中"
                  "折叠的单元（检查、绘图）在这里直接显示；可以拖动的交互图只能在网页中操作；"
                  "练习的参考答案收在下拉块里。"),
            box="注意", figure="图 {n}", exercise="练习 {n}", solution="练习 {n} 的参考答案",
            equation="式 ({n})", page="《{title}》", section="“{title}”一节",
            moving=("> 下一幅图可以在本章的[网页]({url})中操作，控件会重新绘制它。Colab 不绘制它；"
                    "它后面的静态图是它的初始状态。"),
            references="参考文献", cite_sep="；", cite_open="（", cite_close="）", aside="，"),
    }


@dataclass
class Book:
    """What a reference can point at, in one edition: titles, numbers, pages, citations."""

    titles: dict[str, str]       # label -> the title of a chapter or section, in the edition
    exercises: dict[str, int]    # label -> the exercise's number in the book
    equations: dict[str, int]    # label -> the equation's number in the book
    figures: dict[str, dict[str, int]]    # page -> a figure's cell id -> its number in the book
    citations: dict[str, str]    # key -> "Vaswani et al., 2017" / "Vaswani 等，2017"
    whole_pages: set[str]        # the labels of pages' titles (a chapter, the notation page)
    pages: dict[str, str] = field(default_factory=dict)        # label -> its page
    first_authors: dict[str, str] = field(default_factory=dict)  # key -> "Vaswani"
    years: dict[str, str] = field(default_factory=dict)          # key -> "2017"
    bibliography: dict[str, str] = field(default_factory=dict)   # key -> the entry, in order


def _toc_pages() -> list[str]:
    return re.findall(r"file:\s*(\S+)", (ROOT / "_toc.yml").read_text())


def _translations(page: str) -> dict[str, str]:
    po = ROOT / "locales" / "zh_CN" / "LC_MESSAGES" / f"{page}.po"
    return {m.english: m.chinese for m in messages(po)} if po.exists() else {}


def _authors(entry: str) -> list[str] | None:
    authors = re.search(r"^\s*author\s*=\s*\{(.*)\},?\s*$", entry, re.M)
    if not authors:
        return None
    return [name.strip().strip("{}").split(",")[0].strip("{} ")
            for name in re.split(r"\s+and\s+", authors[1])]


def _citation(entry: str, edition: str = "zh") -> str:
    """(first author, year) as the edition's author-year citations give them."""
    names = _authors(entry)
    year = re.search(r"^\s*year\s*=\s*\{?(\d{4})", entry, re.M)
    zh = edition == "zh"
    if not names:  # a web page: its title, as the pages show it
        title = re.search(r"^\s*title\s*=\s*\{+(.*?)\}+,?\s*$", entry, re.M)
        name = title[1] if title else "?"
        return (f"《{name}》" if zh else f"“{name}”") + (f"{'，' if zh else ', '}{year[1]}" if year else "")
    many = len(names) > 2 or (len(names) == 2 and names[1] == "others")
    if zh:
        who = names[0] if len(names) == 1 else f"{names[0]} 等" if many else f"{names[0]} 和 {names[1]}"
        return f"{who}，{year[1] if year else 'n.d.'}"
    who = names[0] if len(names) == 1 else f"{names[0]} et al." if many else f"{names[0]} and {names[1]}"
    return f"{who}, {year[1] if year else 'n.d.'}"


def _bibliography(bib: Path) -> dict[str, str]:
    """Every entry as the bibliography page writes it (pybtex's alpha style, the page's), in
    Markdown, in the page's order."""
    from pybtex.database import parse_file
    from pybtex.plugin import find_plugin

    entries = parse_file(str(bib), bib_format="bibtex").entries
    style = find_plugin("pybtex.style.formatting", "alpha")()
    backend = find_plugin("pybtex.backends", "markdown")()
    def plain(text: str) -> str:  # \url{x}, which pybtex leaves as text: a link, as on the page
        text = " ".join(text.split())
        return re.sub(r"\\\\url (\S+?)(?=,? |,?$|\\\.$)",
                      lambda m: "<" + re.sub(r"\\(.)", r"\1", m[1]) + ">", text)

    return {entry.key: plain(entry.text.render(backend))
            for entry in style.format_entries(entries.values())}


def book(edition: str = "zh") -> Book:
    """The labels, numbers and citations of the whole book, in one edition, read from its sources."""
    titles, exercises, equations, figures, pages = {}, {}, {}, {}, {}
    whole_pages: set[str] = set()
    exercise = figure = 0
    for page in _toc_pages():
        md = ROOT / f"{page}.md"
        if not md.exists():
            continue
        text = md.read_text()
        chinese_of = _translations(page) if edition == "zh" else {}
        for match in _HEADING.finditer(text):
            english = match["title"].strip()
            titles[match["label"]] = chinese_of.get(english, english)
            pages[match["label"]] = page
            if match.start() == _HEADING.search(text).start():  # the page's own title
                whole_pages.add(match["label"])
        for match in _EQUATION.finditer(text):
            equations[match["label"]] = len(equations) + 1
            pages[match["label"]] = page
        for label in re.findall(r"^[`:]{3,}\{exercise\}.*\n(?::[\w-]+:.*\n)*?:label:[ \t]*(\S+)", text, re.M):
            exercise += 1
            exercises[label] = exercise
            pages[label] = page
        ipynb = md.with_suffix(".ipynb")
        figures[page] = {}
        if ipynb.exists():
            for cell in nbformat.read(ipynb, as_version=4).cells:
                shown = cell.metadata.get("mystnb", {}).get("figure")
                if cell.cell_type == "code" and shown:
                    figure += 1
                    figures[page][cell.id] = figure
    path = ROOT / "book" / "references.bib"
    bib = path.read_text()
    found = {m[1]: m[2] for m in re.finditer(r"@\w+\{([^,\s]+),(.*?)\n\}", bib, re.S)}
    years = {key: m[1] for key, entry in found.items()
             if (m := re.search(r"^\s*year\s*=\s*\{?(\d{4})", entry, re.M))}
    return Book(titles, exercises, equations, figures,
                {key: _citation(entry, edition) for key, entry in found.items()}, whole_pages,
                pages, {key: names[0] for key, entry in found.items() if (names := _authors(entry))},
                years, _bibliography(path))


def _link(text: str, url: str | None) -> str:
    return f"[{text}]({url})" if url else text


def _role(kind: str, body: str, book: Book, page: str, edition: Edition) -> str:
    titled = re.fullmatch(r"(?s)(.*?)\s*<([^<>]+)>", body)
    label = titled[2] if titled else body
    where = book.pages.get(label)

    def url(anchor: str | None) -> str | None:
        return edition.url(where, anchor) if where else None

    if kind == "ref":
        if titled:
            return _link(titled[1], url(None if label in book.whole_pages else label))
        if label in book.exercises:
            return _link(edition.exercise.format(n=book.exercises[label]), url(label))
        if label not in book.titles:
            raise TranslationError(f"{page}: {{ref}}`{label}` points at no title the book knows")
        title = book.titles[label]
        if label in book.whole_pages:
            return edition.page.replace("{title}", _link(title, url(None)))
        return edition.section.replace("{title}", _link(title, url(label)))
    if kind == "eq":
        if label not in book.equations:
            raise TranslationError(f"{page}: {{eq}}`{label}` is no numbered equation of the book")
        number = edition.equation.format(n=book.equations[label])
        return number if where == page else _link(number, url(f"equation-{label}"))
    keys = [key.strip() for key in body.split(",")]
    unknown = [key for key in keys if key not in book.citations]
    if unknown:
        raise TranslationError(f"{page}: {{cite}}`{body}` cites {unknown}, not in references.bib")
    return "\x02cite:" + ",".join(keys) + "\x03"


def _depth(before: str) -> int:
    """How many parentheses are open at the end of `before`, in its paragraph."""
    paragraph = before.rsplit("\n\n", 1)[-1]
    paragraph = re.sub(r"\$[^$]*\$|`[^`]*`|\]\([^)]*\)", "", paragraph)  # math, code, link targets
    return (paragraph.count("(") + paragraph.count("（")) - (paragraph.count(")") + paragraph.count("）"))


def _place_citations(text: str, book: Book, edition: Edition, cited: list[str]) -> str:
    """Each citation written for where it stands: after its author's name, the year alone
    ("Clark et al. (2019)"); inside parentheses, without parentheses of its own; before a
    parenthesis, sharing it ("Adam (Kingma and Ba, 2015; the optimiser ...)")."""
    while match := _CITE.search(text):
        keys = match[1].split(",")
        cited += [key for key in keys if key not in cited]
        before, after = text[:match.start()], text[match.end():]
        first = book.first_authors.get(keys[0])
        sentence = re.split(r"(?:(?<!\bal)(?<!e\.g)(?<!i\.e)[.!?]\s|[:;]\s|[。！？：；]|\n\n)",
                            before)[-1]  # the sentence so far ("et al." ends none)
        named = len(keys) == 1 and first and keys[0] in book.years and re.search(
            rf"(?<![\w-]){re.escape(first)}(?![\w-])", sentence)
        words = (book.years[keys[0]] if named else
                 edition.cite_sep.join(book.citations[key] for key in keys))
        if _depth(before) > 0 and re.match(r"[ \t]*[)）,;，；]", after):
            text = before.rstrip() + edition.aside + words + after
            continue
        if edition.code == "zh":
            before = before.rstrip(" \t")
        opening = re.match(r"[ \t]*[(（]", after)
        closed = re.search(r"[)）][ \t]*$", before)
        numbered = re.search(r"\]\([^)]*\)[ \t]*$|[(（][\d.]+[)）][ \t]*$", before)  # a link, (12)
        if closed and not named and not numbered:
            # a gloss just before, "层归一化（layer normalisation）": the citation joins it
            text = before[:closed.start()] + edition.cite_sep + words + before[closed.start()] + after
        elif opening and not named:
            text = before + edition.cite_open + words + edition.cite_sep + after[opening.end():]
        else:
            text = before + edition.cite_open + words + edition.cite_close + after
    return text


def _roles(text: str, book: Book, page: str, edition: Edition, cited: list[str]) -> str:
    """Each role as its text; the spaces MyST needs around a role go where Chinese meets Chinese."""
    text = _ROLE.sub(lambda m: "\x04" + _role(m[1], m[2], book, page, edition) + "\x05", text)
    if edition.code == "zh":
        text = re.sub(rf"(?<=[{_CJK}])[ \t]+\x04(?=[{_CJK}\[]|\x02)", "\x04", text)
        text = re.sub(rf"(?<=[{_CJK}\]])\x05[ \t]+(?=[{_CJK}])", "\x05", text)
    text = text.replace("\x04", "").replace("\x05", "")
    text = _place_citations(text, book, edition, cited)
    if edition.code == "zh":
        text = re.sub(rf"）[ \t]+(?=[{_CJK}])", "）", text)
        text = re.sub(rf"(\]\([^)\s]*\)[》”]?)[ \t]+(?=[{_CJK}])", r"\1", text)  # after a link
        text = re.sub(r"式\s*(\[?)式 \(", r"\1式 (", text)  # “式 {eq}`x`” in a translation
        # no space between a Chinese word and 式 (n): 把式 (11) 代入式 (10)
        text = re.sub(rf"(?<=[{_CJK}])[ \t]+(?=\[?式 \()", "", text)
    return text


_PROTECTED = re.compile(r"(`+[^`]*`+|\$\$.*?\$\$|\$[^$\n]*\$|<[^>\n]*>|\]\([^)\n]*\))", re.S)


def _bold_chinese_emphasis(text: str) -> str:
    """*强调* as **强调**: CJK fonts have no italics, and a slanted Chinese word is synthetic."""
    parts = _PROTECTED.split(text)
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(r"(?<![*A-Za-z0-9_])\*(?=[^\s*])([^*\n]*?[\u3400-\u9fff][^*\n]*?)(?<=[^\s*])\*(?![*A-Za-z0-9_])",
                          r"**\1**", parts[i])
    return "".join(parts)


def _summary(title: str) -> str:
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", title.strip())


def _directives(lines: list[str], book: Book, page: str, edition: Edition) -> list[str]:
    """The lines with every directive (nested ones too) written as plain Markdown."""
    out, i = [], 0
    while i < len(lines):
        opening = _FENCE.match(lines[i].strip())
        if not opening:
            out.append(lines[i])
            i += 1
            continue
        fence, name, title = opening["fence"], opening["name"], opening["title"].strip()
        options, i = {}, i + 1
        while i < len(lines) and _OPTION.match(lines[i].strip()):
            key, value = _OPTION.match(lines[i].strip()).groups()
            options[key], i = value, i + 1
        body = []
        while i < len(lines) and lines[i].strip() != fence:
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise TranslationError(f"{page}: the directive {{{name}}} is not closed by {fence}")
        i += 1
        inner = _directives(body, book, page, edition)
        while inner and not inner[0].strip():
            inner.pop(0)
        if name in _BOXES:
            out += [f"> **{title or edition.box}**", ">"] + [f"> {line}".rstrip() for line in inner]
        elif name == "dropdown":
            out += ["<details>", f"<summary>{_summary(title)}</summary>", ""] + inner + ["", "</details>"]
        elif name == "exercise":
            label = options.get("label")
            if label not in book.exercises:
                raise TranslationError(f"{page}: an exercise without a known :label: ({label})")
            head = f"**{edition.exercise.format(n=book.exercises[label])}**"
            head += (f"{'　' if edition.code == 'zh' else ': '}{title}" if title else "")
            out += [head, ""] + inner
        elif name == "solution":
            if title not in book.exercises:
                raise TranslationError(f"{page}: a solution of no known exercise ({title})")
            summary = edition.solution.format(n=book.exercises[title])
            out += ["<details>", f"<summary>{summary}</summary>", ""] + inner + ["", "</details>"]
        else:
            raise TranslationError(f"{page}: no plain-Markdown form for the directive {{{name}}}")
    return out


def _is_moving_figure(cell) -> bool:
    return any('class="ab-interactive"' in "".join(output.get("data", {}).get("text/html", ""))
               for output in cell.get("outputs", []))


def _plain(text: str, book: Book, page: str, edition: Edition, cited: list[str]) -> str:
    text = re.sub(r"^\([\w-]+\)=[ \t]*\n", "", text, flags=re.M)  # labels
    text = _EQUATION.sub(lambda m: f"\\tag{{{book.equations[m['label']]}}}\n$$", text)
    text = "\n".join(_directives(text.split("\n"), book, page, edition))
    text = _roles(text, book, page, edition, cited)
    return _bold_chinese_emphasis(text) if edition.code == "zh" else text


def for_colab(notebook, page: str, book: Book, edition: Edition | None = None):
    """The notebook (its prose in the edition's language) as plain Markdown (see above)."""
    edition = edition or _editions()["zh"]
    chinese_of = _translations(page) if edition.code == "zh" else {}
    cited: list[str] = []
    cells, first = [], True
    for cell in notebook.cells:
        if cell.cell_type == "code" and _is_moving_figure(cell):  # said before Colab shows nothing
            moves = nbformat.v4.new_markdown_cell(edition.moving.format(url=edition.url(page)))
            moves.id = f"{cell.id}-moves"
            cells.append(moves)
        cells.append(cell)
        if cell.cell_type == "code":
            shown = cell.metadata.get("mystnb", {}).get("figure")
            if shown and shown.get("caption"):
                words = " ".join(shown["caption"].split())
                if edition.code == "zh":
                    if words not in chinese_of:
                        raise TranslationError(f"{page}: a figure's caption is not in the catalog: {words[:60]!r}")
                    words = chinese_of[words]
                label = edition.figure.format(n=book.figures[page][cell.id])
                space = "　" if edition.code == "zh" else " "
                caption = nbformat.v4.new_markdown_cell(
                    f"**{label}**{space}" + _plain(words, book, page, edition, cited))
                caption.id = f"{cell.id}-caption"
                cells.append(caption)
            continue
        text = _plain(cell.source, book, page, edition, cited)
        if first:
            note = edition.note.format(url=edition.url(page))
            heading = re.match(r"(#[^\n]*\n)", text + "\n")
            text = (heading[1] + "\n" + note + "\n\n" + text[heading.end():].lstrip("\n")
                    if heading else note + "\n\n" + text)
            first = False
        cell.source = text.rstrip("\n")
    if cited:
        order = [key for key in book.bibliography if key in cited]
        missing = [key for key in cited if key not in book.bibliography]
        if missing:
            raise TranslationError(f"{page}: cites {missing}, which the bibliography does not format")
        listing = nbformat.v4.new_markdown_cell(
            f"## {edition.references}\n\n" + "\n".join(f"- {book.bibliography[key]}" for key in order))
        listing.id = "references"
        cells.append(listing)
    notebook.cells = cells
    return notebook


def targets(chapters: list[Path] | None = None) -> list[tuple[Path, Path, dict[str, Path]]]:
    """(the chapter's notebook, its catalog, {edition: its Colab notebook}) of each chapter."""
    notebooks = chapters or sorted(CHAPTERS.glob("*.ipynb"))
    return [(path, CATALOGS / f"{path.stem}.po", {code: folder / path.name for code, folder in FOLDERS.items()})
            for path in notebooks]


def colab(english: Path, po: Path, code: str, books: dict[str, Book], editions: dict[str, Edition]):
    """One chapter's Colab notebook in one edition."""
    page = english.relative_to(ROOT).with_suffix("").as_posix()
    source = chinese(english, po) if code == "zh" else nbformat.read(english, as_version=4)
    return for_colab(source, page, books[code], editions[code])


def render(notebook) -> str:
    return nbformat.writes(notebook) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", type=Path, help="chapters' notebooks (default: all)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 on a difference")
    args = parser.parse_args(argv)
    problems = []
    chosen = [path.resolve() for path in args.chapters] or None
    editions = _editions()
    books = {code: book(code) for code in editions}
    for english, po, written in targets(chosen):
        for code, target in written.items():
            try:
                text = render(colab(english, po, code, books, editions))
            except TranslationError as error:
                problems.append(f"{code}: {error}")
                continue
            if args.check:
                if not target.exists() or target.read_text() != text:
                    problems.append(f"{target.relative_to(ROOT)} differs from its chapter's notebook"
                                    + (" and catalog" if code == "zh" else ""))
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
                print(f"wrote {target.relative_to(ROOT)}")
    if args.check:
        for code, folder in FOLDERS.items():
            stale = {path.name for path in folder.glob("*.ipynb")} - {path.name for path in CHAPTERS.glob("*.ipynb")}
            problems += [f"book/chapters/{code}/{name} has no chapter notebook" for name in sorted(stale)]
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print("The Colab notebooks are stale: run `make notebooks-colab` (after `make translations`).",
              file=sys.stderr)
        return 1
    if args.check:
        print(f"{len(targets()) * len(FOLDERS)} Colab notebooks match their chapters' notebooks and catalogs.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
