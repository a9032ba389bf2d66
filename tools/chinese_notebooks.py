"""The Chinese notebooks: each chapter's notebook with its prose in Chinese, for Colab.

`book/chapters/zh/NN_name.ipynb` is made from two sources and nothing else: the English
notebook `book/chapters/NN_name.ipynb` and the chapter's translation catalog
`locales/zh_CN/LC_MESSAGES/book/chapters/NN_name.po`. Code cells, with their outputs and
metadata, are copied unchanged, so one run of the English notebook (`make nbval`) is a run of
both. In a markdown cell every message of the catalog, a paragraph, a heading, a list item, a
table cell or a directive's title, exactly as the gettext builder cut it from that cell (its
line breaks read as spaces), is replaced by its translation; markup outside the messages (list
markers, directive fences, labels, display math, code in fences) is kept. A message of the
catalog that is found in no cell is an error, and so is an English sentence left over.

Then the prose is made plain Markdown for Colab, which renders no MyST (`for_colab`): notes,
dropdowns, exercises and solutions, references, equation numbers, citations and figure
captions are written as the Chinese HTML page shows them, with the book's own numbers.

    python tools/chinese_notebooks.py            write every Chinese notebook
    python tools/chinese_notebooks.py --check    exit 1 when one differs from what it would write
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ROOT / "book" / "chapters"
FOLDER = CHAPTERS / "zh"  # book/chapters/zh/NN_name.ipynb, beside the English notebooks
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
# block, a role as raw text, a label as a stray line. Once the prose is Chinese, each is written
# as what the Chinese HTML page shows: a note as a quotation, a dropdown or a solution as
# <details>, an exercise with its number, a reference as its title, an equation reference as
# 式 (n) with \tag{n} on the equation, a citation as (author, year); each figure's caption goes
# before the prose that follows it. The numbers are the book's: exercises, figures and
# equations count through the chapters in order, as on the pages.
NOTE = ("> 这个 notebook 由本书网页版的同一份源文件生成，供在 Colab 中运行。网页中折叠的单元"
        "（检查、绘图）在这里直接显示；可以拖动的交互图只在网页版中能操作，这里显示它的初始状态；"
        "练习的参考答案收在“参考答案”折叠块里。")
_FENCE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{(?P<name>[\w-]+)\}[ \t]*(?P<title>.*)$")
_OPTION = re.compile(r"^:([\w-]+):[ \t]*(.*)$")
_ROLE = re.compile(r"\{(ref|eq|cite)\}`([^`]*)`")
_EQUATION = re.compile(r"^\$\$[ \t]*\((?P<label>[\w-]+)\)[ \t]*$", re.M)
_HEADING = re.compile(r"^\((?P<label>[\w-]+)\)=[ \t]*\n+#{1,6}[ \t]+(?P<title>.+)$", re.M)
_BOXES = {"admonition", "note", "tip", "warning", "important", "seealso"}


@dataclass
class Book:
    """What a reference can point at, in the Chinese edition: titles, numbers, citations."""

    titles: dict[str, str]       # label -> the Chinese title of a chapter or section
    exercises: dict[str, int]    # label -> the exercise's number in the book
    equations: dict[str, int]    # label -> the equation's number in the book
    figures: dict[str, dict[str, int]]    # page -> a figure's cell id -> its number in the book
    citations: dict[str, str]    # key -> "Vaswani 等，2017"
    whole_pages: set[str]        # the labels of pages' titles (a chapter, the notation page)


def _toc_pages() -> list[str]:
    return re.findall(r"file:\s*(\S+)", (ROOT / "_toc.yml").read_text())


def _translations(page: str) -> dict[str, str]:
    po = ROOT / "locales" / "zh_CN" / "LC_MESSAGES" / f"{page}.po"
    return {m.english: m.chinese for m in messages(po)} if po.exists() else {}


def _citation(entry: str) -> str:
    """(first author, year) as the Chinese pages' author-year citations give them."""
    authors = re.search(r"^\s*author\s*=\s*\{(.*)\},?\s*$", entry, re.M)
    year = re.search(r"^\s*year\s*=\s*\{?(\d{4})", entry, re.M)
    if not authors:  # a web page: its title, as the pages show it
        title = re.search(r"^\s*title\s*=\s*\{+(.*?)\}+,?\s*$", entry, re.M)
        return f"《{title[1] if title else '?'}》" + (f"，{year[1]}" if year else "")
    names = [name.strip().strip("{}").split(",")[0].strip("{} ")
             for name in re.split(r"\s+and\s+", authors[1])]
    who = (names[0] if len(names) == 1 else f"{names[0]} 等" if len(names) > 2 or names[1] == "others"
           else f"{names[0]} 和 {names[1]}")
    return f"{who}，{year[1] if year else 'n.d.'}"


def book() -> Book:
    """The labels, numbers and citations of the whole book, read from its sources."""
    titles, exercises, equations, figures = {}, {}, {}, {}
    whole_pages: set[str] = set()
    exercise = figure = 0
    for page in _toc_pages():
        md = ROOT / f"{page}.md"
        if not md.exists():
            continue
        text, chinese_of = md.read_text(), _translations(page)
        for match in _HEADING.finditer(text):
            english = match["title"].strip()
            titles[match["label"]] = chinese_of.get(english, english)
            if match.start() == _HEADING.search(text).start():  # the page's own title
                whole_pages.add(match["label"])
        for match in _EQUATION.finditer(text):
            equations[match["label"]] = len(equations) + 1
        for label in re.findall(r"^[`:]{3,}\{exercise\}.*\n(?::[\w-]+:.*\n)*?:label:[ \t]*(\S+)", text, re.M):
            exercise += 1
            exercises[label] = exercise
        ipynb = md.with_suffix(".ipynb")
        figures[page] = {}
        if ipynb.exists():
            for cell in nbformat.read(ipynb, as_version=4).cells:
                shown = cell.metadata.get("mystnb", {}).get("figure")
                if cell.cell_type == "code" and shown:
                    figure += 1
                    figures[page][cell.id] = figure
    bib = (ROOT / "book" / "references.bib").read_text()
    citations = {m[1]: _citation(m[2]) for m in re.finditer(r"@\w+\{([^,\s]+),(.*?)\n\}", bib, re.S)}
    return Book(titles, exercises, equations, figures, citations, whole_pages)


def _role(kind: str, body: str, book: Book, page: str) -> str:
    titled = re.fullmatch(r"(?s)(.*?)\s*<([^<>]+)>", body)
    if kind == "ref" and titled:
        return titled[1]
    if kind == "ref":
        if body in book.exercises:
            return f"练习 {book.exercises[body]}"
        if body not in book.titles:
            raise TranslationError(f"{page}: {{ref}}`{body}` points at no title the book knows")
        title = book.titles[body]
        return f"《{title}》" if body in book.whole_pages else f"“{title}”一节"
    if kind == "eq":
        label = titled[2] if titled else body
        if label not in book.equations:
            raise TranslationError(f"{page}: {{eq}}`{label}` is no numbered equation of the book")
        return f"式 ({book.equations[label]})"
    keys = [key.strip() for key in body.split(",")]
    unknown = [key for key in keys if key not in book.citations]
    if unknown:
        raise TranslationError(f"{page}: {{cite}}`{body}` cites {unknown}, not in references.bib")
    return "（" + "；".join(book.citations[key] for key in keys) + "）"


_CJK = "\u3000-\u303f\u3400-\u9fff\uff00-\uffef“”《》"


def _roles(text: str, book: Book, page: str) -> str:
    """Each role as its text; the spaces MyST needs around a role go where Chinese meets Chinese."""
    # an equation's 式 (n) keeps its spaces, as on the page ("打分 式 (1)", not "打分式 (1)")
    text = _ROLE.sub(lambda m: _role(m[1], m[2], book, page) if m[1] == "eq"
                     else "\x02" + _role(m[1], m[2], book, page) + "\x03", text)
    text = re.sub(rf"(?<=[{_CJK}])[ \t]+\x02(?=[{_CJK}])|[ \t]+\x02(?=（)", "\x02", text)
    text = re.sub(rf"(?<=[{_CJK}])\x03[ \t]+(?=[{_CJK}])", "\x03", text)
    text = text.replace("\x02", "").replace("\x03", "")
    return re.sub(r"式\s*式 \(", "式 (", text)  # “式 {eq}`x`” in a translation


def _summary(title: str) -> str:
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", title.strip())


def _directives(lines: list[str], book: Book, page: str) -> list[str]:
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
        inner = _directives(body, book, page)
        while inner and not inner[0].strip():
            inner.pop(0)
        if name in _BOXES:
            out += [f"> **{title or '注意'}**", ">"] + [f"> {line}".rstrip() for line in inner]
        elif name == "dropdown":
            out += ["<details>", f"<summary>{_summary(title)}</summary>", ""] + inner + ["", "</details>"]
        elif name == "exercise":
            label = options.get("label")
            if label not in book.exercises:
                raise TranslationError(f"{page}: an exercise without a known :label: ({label})")
            head = f"**练习 {book.exercises[label]}**" + (f"　{title}" if title else "")
            out += [head, ""] + inner
        elif name == "solution":
            if title not in book.exercises:
                raise TranslationError(f"{page}: a solution of no known exercise ({title})")
            out += ["<details>", f"<summary>练习 {book.exercises[title]} 的参考答案</summary>", ""]
            out += inner + ["", "</details>"]
        else:
            raise TranslationError(f"{page}: no plain-Markdown form for the directive {{{name}}}")
    return out


def for_colab(notebook, page: str, book: Book):
    """The translated notebook with its prose as plain Markdown (see above)."""
    captions: list[str] = []
    chinese_of = _translations(page)
    first = True
    for cell in notebook.cells:
        if cell.cell_type == "code":
            shown = cell.metadata.get("mystnb", {}).get("figure")
            if shown and shown.get("caption"):
                english = " ".join(shown["caption"].split())
                number = book.figures[page][cell.id]
                if english not in chinese_of:
                    raise TranslationError(f"{page}: a figure's caption is not in the catalog: {english[:60]!r}")
                words = _roles(chinese_of[english], book, page)
                captions.append(f"**图 {number}**　{words}")
            continue
        text = re.sub(r"^\([\w-]+\)=[ \t]*\n", "", cell.source, flags=re.M)  # labels
        text = _EQUATION.sub(lambda m: f"\\tag{{{book.equations[m['label']]}}}\n$$", text)
        text = "\n".join(_directives(text.split("\n"), book, page))
        text = _roles(text, book, page)
        if captions:
            text, captions = "\n\n".join(captions) + "\n\n" + text, []
        if first:
            heading = re.match(r"(#[^\n]*\n)", text + "\n")
            text = (heading[1] + "\n" + NOTE + "\n\n" + text[heading.end():].lstrip("\n")
                    if heading else NOTE + "\n\n" + text)
            first = False
        cell.source = text.rstrip("\n")
    if captions:
        raise TranslationError(f"{page}: no prose follows the last figure to carry its caption")
    return notebook


def pairs(chapters: list[Path] | None = None) -> list[tuple[Path, Path, Path]]:
    """(English notebook, catalog, Chinese notebook) of each chapter."""
    notebooks = chapters or sorted(CHAPTERS.glob("*.ipynb"))
    return [(path, CATALOGS / f"{path.stem}.po", FOLDER / path.name) for path in notebooks]


def render(notebook) -> str:
    return nbformat.writes(notebook) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", type=Path, help="English notebooks (default: all)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 on a difference")
    args = parser.parse_args(argv)
    problems = []
    chosen = [path.resolve() for path in args.chapters] or None
    whole = book()
    for english, po, target in pairs(chosen):
        page = english.relative_to(ROOT).with_suffix("").as_posix()
        try:
            text = render(for_colab(chinese(english, po), page, whole))
        except TranslationError as error:
            problems.append(str(error))
            continue
        if args.check:
            if not target.exists() or target.read_text() != text:
                problems.append(f"{target.relative_to(ROOT)} differs from its English notebook and catalog")
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            print(f"wrote {target.relative_to(ROOT)}")
    if args.check:
        stale = {path.name for path in FOLDER.glob("*.ipynb")} - {path.name for path in CHAPTERS.glob("*.ipynb")}
        problems += [f"book/chapters/zh/{name} has no English notebook" for name in sorted(stale)]
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print("The Chinese notebooks are stale: run `make notebooks-zh` (after `make translations`).",
              file=sys.stderr)
        return 1
    if args.check:
        print(f"{len(pairs())} Chinese notebooks match their English notebooks and catalogs.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
