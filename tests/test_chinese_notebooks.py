"""The Chinese notebooks (book/chapters/zh/): the English notebook's code, outputs and structure
exactly, its prose from the chapter's catalog. Because the code cells are the same, character
for character, the standalone run of each English notebook (`make nbval`) is a run of its
Chinese twin; these tests prove that identity. `make notebooks-check` proves they are current
(tools/chinese_notebooks.py --check)."""

from __future__ import annotations

import re

import chinese_notebooks  # tools/chinese_notebooks.py
import nbformat
import pytest
from chapters import NOTEBOOKS, ids

CJK = re.compile(r"[\u3400-\u9fff]")
PAIRS = [(english, chinese_notebooks.FOLDER / english.name) for english in NOTEBOOKS]


@pytest.mark.parametrize("english, chinese", PAIRS, ids=ids(NOTEBOOKS))
def test_code_cells_outputs_and_structure_are_the_english_ones(english, chinese):
    ours, theirs = nbformat.read(english, as_version=4), nbformat.read(chinese, as_version=4)
    assert [cell.cell_type for cell in theirs.cells] == [cell.cell_type for cell in ours.cells]
    assert [cell.id for cell in theirs.cells] == [cell.id for cell in ours.cells]
    assert theirs.metadata.kernelspec == ours.metadata.kernelspec
    for mine, twin in zip(ours.cells, theirs.cells):
        if mine.cell_type == "code":
            assert twin == mine, f"{chinese.name}: code cell {mine.id} differs from the English one"


@pytest.mark.parametrize("english, chinese", PAIRS, ids=ids(NOTEBOOKS))
def test_the_prose_is_chinese(english, chinese):
    ours, theirs = nbformat.read(english, as_version=4), nbformat.read(chinese, as_version=4)
    prose = [(mine.source, twin.source) for mine, twin in zip(ours.cells, theirs.cells)
             if mine.cell_type == "markdown"]
    translated = [twin for mine, twin in prose if twin != mine]
    assert len(translated) >= 0.9 * len(prose), f"{chinese.name}: {len(prose) - len(translated)} cells left as they were"
    assert all(CJK.search(text) for text in translated)
    # Labels, references and math survive translation unchanged.
    for mine, twin in prose:
        assert re.findall(r"^\([\w-]+\)=$", mine, re.M) == re.findall(r"^\([\w-]+\)=$", twin, re.M)
        # A translation may give a reference an explicit title ({ref}`“掩码”一节 <sec-x>`): the
        # targets must survive, not the text.
        assert _targets(mine) == _targets(twin) or "<" in mine


def _targets(text: str) -> list[str]:
    """The targets of the {ref}, {eq} and {cite} roles of `text`, with or without a title."""
    return sorted(re.sub(r"^.*<([^<>]+)>\s*$", r"\1", body, flags=re.S)
                  for body in re.findall(r"\{(?:ref|eq|cite)\}`([^`]*)`", text))


def test_a_message_is_replaced_wherever_the_catalog_cut_it(tmp_path):
    """Paragraphs over several lines, list items, headings, table cells and directive titles."""
    source = (
        "# A title\n\nA paragraph that runs\nover two lines, with `code`.\n\n"
        "- an item\n  that continues\n- another item\n\n| key | value |\n|---|---|\n| one | two |\n\n"
        "```{dropdown} A deep dive\nInside the dive.\n```\n\n$$\nx = 1\n$$\n"
    )
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [nbformat.v4.new_markdown_cell(source), nbformat.v4.new_code_cell("x = 1  # A title")]
    english = tmp_path / "00_test.ipynb"
    nbformat.write(notebook, english)
    translations = {
        "A title": "一个标题", "A paragraph that runs over two lines, with `code`.": "一段跨两行的文字，带 `code`。",
        "an item that continues": "一个延续的条目", "another item": "另一个条目", "key": "键",
        "value": "值", "one": "一", "two": "二", "A deep dive": "深入", "Inside the dive.": "深入之中。",
    }
    po = tmp_path / "00_test.po"
    po.write_text('msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n' + "".join(
        f'msgid "{english_text}"\nmsgstr "{chinese_text}"\n\n' for english_text, chinese_text in translations.items()
    ))
    result = chinese_notebooks.chinese(english, po)
    assert result.cells[0].source == (
        "# 一个标题\n\n一段跨两行的文字，带 `code`。\n\n- 一个延续的条目\n- 另一个条目\n\n| 键 | 值 |\n"
        "|---|---|\n| 一 | 二 |\n\n```{dropdown} 深入\n深入之中。\n```\n\n$$\nx = 1\n$$\n"
    )
    assert result.cells[1] == notebook.cells[1]  # code is never translated


def test_a_message_found_in_no_cell_or_untranslated_is_an_error(tmp_path):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell("Some prose here.")]
    english = tmp_path / "00_test.ipynb"
    nbformat.write(notebook, english)
    po = tmp_path / "00_test.po"
    po.write_text('msgid "Other prose."\nmsgstr "别的文字。"\n')
    with pytest.raises(chinese_notebooks.TranslationError, match="in no markdown cell"):
        chinese_notebooks.chinese(english, po)
    po.write_text('msgid "Some prose here."\nmsgstr ""\n')
    with pytest.raises(chinese_notebooks.TranslationError, match="not translated"):
        chinese_notebooks.chinese(english, po)


def _book_macros() -> list[str]:
    """The TeX macros the HTML book defines for MathJax (_config.yml): Colab has none of them."""
    import yaml

    config = yaml.safe_load((chinese_notebooks.ROOT / "_config.yml").read_text())
    return sorted(config["sphinx"]["config"]["mathjax3_config"]["tex"]["macros"])


@pytest.mark.parametrize("notebook", NOTEBOOKS + [chinese for _, chinese in PAIRS], ids=lambda p: p.parent.name + "/" + p.stem)
def test_the_math_of_a_notebook_needs_no_macro_of_the_book(notebook):
    """In Colab, `\\softmax` would show as an error: the notebooks write `\\operatorname{softmax}`."""
    macros = _book_macros()
    assert macros, "the book defines no macro: this test checks nothing"
    prose = "\n".join(cell.source for cell in nbformat.read(notebook, as_version=4).cells
                      if cell.cell_type == "markdown")
    used = [name for name in macros if re.search(rf"\\{name}(?![A-Za-z])", prose)]
    assert not used, f"{notebook.name} uses the book's macros {used}, which Colab does not define"
