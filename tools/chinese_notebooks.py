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
    for english, po, target in pairs(chosen):
        try:
            text = render(chinese(english, po))
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
