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
    # What Colab cannot render is gone: MyST's roles, directives and labels.
    for mine, twin in prose:
        assert not re.search(r"\{(?:ref|eq|cite|doc|numref)\}`", twin), twin[:200]
        assert not re.search(r"^\s*(?:`{3,}|:{3,})\{[\w-]+\}", twin, re.M), twin[:200]
        assert not re.search(r"^\([\w-]+\)=\s*$", twin, re.M), twin[:200]
        # every numbered equation keeps its number, as a \tag
        assert len(re.findall(r"^\$\$ \([\w-]+\)", mine, re.M)) == len(re.findall(r"\\tag\{\d+\}", twin))
    assert theirs.cells[[c.cell_type for c in theirs.cells].index("markdown")].source.count("Colab") == 1


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


def _book() -> chinese_notebooks.Book:
    return chinese_notebooks.Book(
        titles={"ch-x": "某章", "sec-y": "某节"}, exercises={"ex-z": 7}, equations={"eq-a": 12},
        figures={"p": {"fig-cell": 3}}, citations={"k2020": "Kim 等，2020"},
        whole_pages={"ch-x"})


def test_colab_gets_plain_markdown_with_the_books_numbers():
    """Notes, dropdowns, exercises, solutions, references, equations, citations and captions,
    each as the Chinese HTML page shows it, in Markdown that Colab renders."""
    source = (
        "(ch-x)=\n# 标题\n\n见 {ref}`ch-x` 与 {ref}`sec-y`，{ref}`“那一节” <sec-y>`，式 {eq}`eq-a`，"
        "{eq}`eq-a` {cite}`k2020`。\n\n$$\nx = 1\n$$ (eq-a)\n\n"
        "```{admonition} 笔记 ↔ 本章\n:class: notes-box\n- 一条\n```\n\n"
        "````{dropdown} 深入 `code`\n里面。\n\n```python\nx = 1\n```\n````\n\n"
        "```{exercise}\n:label: ex-z\n\n做一件事。\n```\n\n"
        "````{solution} ex-z\n:class: dropdown\n\n答案。\n````\n"
    )
    notebook = nbformat.v4.new_notebook()
    figure = nbformat.v4.new_code_cell("plot()")
    figure.id = "fig-cell"
    figure.metadata["mystnb"] = {"figure": {"caption": "A figure.", "name": "fig-a"}}
    notebook.cells = [nbformat.v4.new_markdown_cell(source), figure, nbformat.v4.new_markdown_cell("后文。")]
    original = chinese_notebooks._translations
    chinese_notebooks._translations = lambda page: {"A figure.": "一张图，见 {ref}`ch-x`。"}
    try:
        result = chinese_notebooks.for_colab(notebook, "p", _book())
    finally:
        chinese_notebooks._translations = original
    text = result.cells[0].source
    assert text.startswith("# 标题\n\n> 这个 notebook") and "(ch-x)=" not in text
    assert "见《某章》与“某节”一节，“那一节”，式 (12)，式 (12)（Kim 等，2020）。" in text
    assert "$$\nx = 1\n\\tag{12}\n$$" in text
    assert "> **笔记 ↔ 本章**\n>\n> - 一条" in text
    assert "<details>\n<summary>深入 <code>code</code></summary>\n\n里面。\n\n```python\nx = 1\n```\n\n</details>" in text
    assert "**练习 7**\n\n做一件事。" in text
    assert "<summary>练习 7 的参考答案</summary>\n\n答案。\n\n</details>" in text
    assert result.cells[1] == figure  # code is never touched
    assert result.cells[2].source == "**图 3**　一张图，见《某章》。\n\n后文。"


@pytest.mark.parametrize("source, problem", [
    ("见 {ref}`sec-missing`。", "points at no title"),
    ("式 {eq}`eq-missing`。", "no numbered equation"),
    ("{cite}`nobody1999`", "not in references.bib"),
    ("```{exercise}\n:label: ex-missing\n做。\n```", "without a known :label:"),
    ("```{glossary}\n术语\n```", "no plain-Markdown form"),
    ("```{dropdown} 没有结尾\n里面。", "not closed"),
])
def test_what_colab_cannot_show_is_an_error(source, problem):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell(source)]
    with pytest.raises(chinese_notebooks.TranslationError, match=problem):
        chinese_notebooks.for_colab(notebook, "p", _book())


@pytest.mark.parametrize("author, expected", [
    ("author = {Shazeer, Noam},", "Shazeer，2019"),
    ("author = {Kingma, Diederik P. and Ba, Jimmy},", "Kingma 和 Ba，2019"),
    ("author = {Dao, Tri and Fu, Daniel Y. and Ermon, Stefano},", "Dao 等，2019"),
    ("author = {Grattafiori, Aaron and others},", "Grattafiori 等，2019"),
    ("author = {{BigScience Workshop}},", "BigScience Workshop，2019"),
    ("title = {{A page}},", "《A page》，2019"),
])
def test_a_citation_is_written_author_year_as_the_pages_write_it(author, expected):
    assert chinese_notebooks._citation(f"\n  {author}\n  year = {{2019}}\n") == expected
