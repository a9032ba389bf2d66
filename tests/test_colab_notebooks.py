"""The Colab notebooks of both editions (book/chapters/en/ and zh/): the chapter's notebook's
code and outputs exactly, its prose as plain Markdown (Colab renders no MyST), the Chinese
prose from the chapter's catalog. Because the code cells are the same, character for
character, the standalone run of each chapter's notebook (`make nbval`) is a run of its Colab
twins, and `make colab-run` runs chapters 6 and 9 of both editions as Colab's "Run all" does.
`make notebooks-check` proves they are current (tools/colab_notebooks.py --check)."""

from __future__ import annotations

import re

import colab_notebooks  # tools/colab_notebooks.py
import nbformat
import pytest
from chapters import NOTEBOOKS, ids

CJK = re.compile(r"[\u3400-\u9fff]")
EDITIONS = colab_notebooks._editions()
COLAB = [(chapter, code, colab_notebooks.FOLDERS[code] / chapter.name)
         for chapter in NOTEBOOKS for code in EDITIONS]
COLAB_IDS = [f"{code}-{chapter.stem}" for chapter, code, _ in COLAB]
INSERTED = re.compile(r".+-(caption|moves)$|references")  # cells the Colab notebooks add
FIGURE = {"en": r"\*\*Fig\. (\d+)\*\* ", "zh": r"\*\*图 (\d+)\*\*　"}


def _read(path):
    return nbformat.read(path, as_version=4)


@pytest.mark.parametrize("chapter, code, colab", COLAB, ids=COLAB_IDS)
def test_code_cells_and_outputs_are_the_chapters_own(chapter, code, colab):
    ours, theirs = _read(chapter), _read(colab)
    kept = [cell for cell in theirs.cells if not INSERTED.fullmatch(cell.id)]
    assert [cell.id for cell in kept] == [cell.id for cell in ours.cells]
    assert [cell.cell_type for cell in kept] == [cell.cell_type for cell in ours.cells]
    assert theirs.metadata.kernelspec == ours.metadata.kernelspec
    for mine, twin in zip(ours.cells, kept):
        if mine.cell_type == "code":
            assert twin == mine, f"{colab}: code cell {mine.id} differs from the chapter's"
    assert all(cell.cell_type == "markdown" for cell in theirs.cells if INSERTED.fullmatch(cell.id))


@pytest.mark.parametrize("chapter", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_both_editions_have_the_same_cells(chapter):
    english, chinese = (_read(colab_notebooks.FOLDERS[code] / chapter.name) for code in ("en", "zh"))
    assert [(c.id, c.cell_type) for c in english.cells] == [(c.id, c.cell_type) for c in chinese.cells]


@pytest.mark.parametrize("chapter", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_the_chinese_prose_is_chinese(chapter):
    english, chinese = (_read(colab_notebooks.FOLDERS[code] / chapter.name) for code in ("en", "zh"))
    prose = [(mine.source, twin.source) for mine, twin in zip(english.cells, chinese.cells)
             if mine.cell_type == "markdown" and mine.id != "references"]
    translated = [twin for mine, twin in prose if twin != mine]
    assert len(translated) >= 0.9 * len(prose), f"{chapter.name}: {len(prose) - len(translated)} cells left as they were"
    assert all(CJK.search(text) for text in translated)


_MYST = [
    (r"\{(?:ref|eq|cite|doc|numref|term|math|download)\}`", "a role"),
    (r"^\s*(?:>\s*)*(?:`{3,}|:{3,})\{[\w-]+\}", "a directive's fence"),
    (r"^\s*(?:>\s*)*:(?:class|label|name|tags|width|align|open):", "a directive's option"),
    (r"^\([\w-]+\)=\s*$", "a label"),
    (r"^\$\$ *\([\w-]+\)", "an equation's label"),
]


@pytest.mark.parametrize("chapter, code, colab", COLAB, ids=COLAB_IDS)
def test_no_myst_is_left_for_colab_to_show_as_text(chapter, code, colab):
    ours, theirs = _read(chapter), _read(colab)
    for cell in theirs.cells:
        if cell.cell_type != "markdown":
            continue
        for pattern, what in _MYST:
            found = re.search(pattern, cell.source, re.M)
            assert not found, f"{colab.name}, cell {cell.id}: {what} is left: {found[0]!r}"
    prose = "\n".join(cell.source for cell in ours.cells if cell.cell_type == "markdown")
    plain = "\n".join(cell.source for cell in theirs.cells if cell.cell_type == "markdown")
    # every numbered equation keeps its number, as a \tag
    assert len(re.findall(r"^\$\$ \([\w-]+\)", prose, re.M)) == len(re.findall(r"\\tag\{\d+\}", plain))
    # every reference to a section or chapter is a link to the published page
    site = re.escape(EDITIONS[code].site)
    refs = len(re.findall(r"\{ref\}`", prose))
    assert len(re.findall(rf"\]\({site}book/\S+?\.html(?:#[\w-]+)?\)", plain)) >= refs
    first = next(cell for cell in theirs.cells if cell.cell_type == "markdown")
    assert first.source.count("Colab") == 1 and EDITIONS[code].url(
        chapter.relative_to(colab_notebooks.ROOT).with_suffix("").as_posix()) in first.source


@pytest.mark.parametrize("chapter, code, colab", COLAB, ids=COLAB_IDS)
def test_no_cell_raises(chapter, code, colab):
    """Colab's "Run all" stops at the first error: an error is shown by expect_error instead."""
    for cell in _read(colab).cells:
        if cell.cell_type != "code":
            continue
        assert "raises-exception" not in cell.metadata.get("tags", []), f"{colab.name}: {cell.id}"
        assert not [out for out in cell.outputs if out.output_type == "error"], f"{colab.name}: {cell.id}"
        if "expect_error(" in cell.source and not cell.source.lstrip().startswith("#| export"):
            printed = "".join(out.get("text", "") for out in cell.outputs if out.output_type == "stream")
            assert re.fullmatch(r"(?:\w+Error|\w+Exception): [^\n]+\n", printed), f"{colab.name}: {printed!r}"


@pytest.mark.parametrize("chapter, code, colab", COLAB, ids=COLAB_IDS)
def test_each_caption_stands_right_after_its_figure(chapter, code, colab):
    cells = _read(colab).cells
    figures = 0
    for index, cell in enumerate(cells):
        caption = cell.metadata.get("mystnb", {}).get("figure", {}).get("caption") if cell.cell_type == "code" else None
        if caption:
            figures += 1
            after = cells[index + 1]
            assert after.id == f"{cell.id}-caption" and re.match(FIGURE[code], after.source), (
                f"{colab.name}: figure {cell.id} is followed by {after.source[:80]!r}")
            assert len(re.findall(FIGURE[code], after.source)) == 1, "one caption a cell"
    captions = [cell for cell in cells if cell.cell_type == "markdown" and re.search(FIGURE[code], cell.source)]
    assert len(captions) == figures, f"{colab.name}: a caption stands apart from its figure"


@pytest.mark.parametrize("chapter, code, colab", COLAB, ids=COLAB_IDS)
def test_a_moving_figure_says_that_it_moves_on_the_web_page(chapter, code, colab):
    cells = _read(colab).cells
    for index, cell in enumerate(cells):
        if cell.cell_type == "code" and colab_notebooks._is_moving_figure(cell):  # said before it
            assert cells[index - 1].id == f"{cell.id}-moves"
            assert EDITIONS[code].url(chapter.relative_to(colab_notebooks.ROOT).with_suffix("").as_posix()) in cells[index - 1].source


@pytest.mark.parametrize("chapter, code, colab", COLAB, ids=COLAB_IDS)
def test_a_notebook_that_cites_lists_what_it_cites(chapter, code, colab):
    source = chapter.with_suffix(".md").read_text()
    keys = {key.strip() for body in re.findall(r"\{cite\}`([^`]+)`", source) for key in body.split(",")}
    cells = _read(colab).cells
    if not keys:
        assert cells[-1].id != "references"
        return
    assert cells[-1].id == "references"
    assert cells[-1].source.startswith(f"## {EDITIONS[code].references}\n")
    bibliography = colab_notebooks.book(code).bibliography
    listed = re.findall(r"^- (.+)$", cells[-1].source, re.M)
    assert listed == [entry for key, entry in bibliography.items() if key in keys]


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
    result = colab_notebooks.chinese(english, po)
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
    with pytest.raises(colab_notebooks.TranslationError, match="in no markdown cell"):
        colab_notebooks.chinese(english, po)
    po.write_text('msgid "Some prose here."\nmsgstr ""\n')
    with pytest.raises(colab_notebooks.TranslationError, match="not translated"):
        colab_notebooks.chinese(english, po)


def _book_macros() -> list[str]:
    """The TeX macros the HTML book defines for MathJax (_config.yml): Colab has none of them."""
    import yaml

    config = yaml.safe_load((colab_notebooks.ROOT / "_config.yml").read_text())
    return sorted(config["sphinx"]["config"]["mathjax3_config"]["tex"]["macros"])


@pytest.mark.parametrize("notebook", NOTEBOOKS + [colab for _, _, colab in COLAB], ids=lambda p: p.parent.name + "/" + p.stem)
def test_the_math_of_a_notebook_needs_no_macro_of_the_book(notebook):
    """In Colab, `\\softmax` would show as an error: the notebooks write `\\operatorname{softmax}`."""
    macros = _book_macros()
    assert macros, "the book defines no macro: this test checks nothing"
    prose = "\n".join(cell.source for cell in nbformat.read(notebook, as_version=4).cells
                      if cell.cell_type == "markdown")
    used = [name for name in macros if re.search(rf"\\{name}(?![A-Za-z])", prose)]
    assert not used, f"{notebook.name} uses the book's macros {used}, which Colab does not define"


def _book(edition: str = "zh") -> colab_notebooks.Book:
    cite = "Kim 等，2020" if edition == "zh" else "Kim et al., 2020"
    return colab_notebooks.Book(
        titles={"ch-x": "某章", "sec-y": "某节" if edition == "zh" else "Some section"},
        exercises={"ex-z": 7}, equations={"eq-a": 12},
        figures={"p": {"fig-cell": 3}}, citations={"k2020": cite},
        whole_pages={"ch-x"}, pages={"ch-x": "p", "sec-y": "p", "ex-z": "p", "eq-a": "p"},
        first_authors={"k2020": "Kim"}, years={"k2020": "2020"},
        bibliography={"k2020": "Kim, A. A paper. 2020."})


def test_colab_gets_plain_markdown_with_the_books_numbers():
    """Notes, dropdowns, exercises, solutions, references, equations, citations and captions,
    each as the Chinese HTML page shows it, in Markdown that Colab renders."""
    source = (
        "(ch-x)=\n# 标题\n\n见 {ref}`ch-x` 与 {ref}`sec-y`，{ref}`“那一节” <sec-y>`，把 式 {eq}`eq-a` 代入，"
        "{eq}`eq-a` {cite}`k2020`。\n\n$$\nx = 1\n$$ (eq-a)\n\n"
        "```{admonition} 笔记 ↔ 本章\n:class: notes-box\n- 一条*强调*\n```\n\n"
        "````{dropdown} 深入 `code`\n里面。\n\n```python\nx = 1\n```\n````\n\n"
        "```{exercise}\n:label: ex-z\n\n做一件事。\n```\n\n"
        "````{solution} ex-z\n:class: dropdown\n\n答案。\n````\n"
    )
    notebook = nbformat.v4.new_notebook()
    figure = nbformat.v4.new_code_cell("plot()")
    figure.id = "fig-cell"
    figure.metadata["mystnb"] = {"figure": {"caption": "A figure.", "name": "fig-a"}}
    check = nbformat.v4.new_code_cell("check()")
    notebook.cells = [nbformat.v4.new_markdown_cell(source), figure, check, nbformat.v4.new_markdown_cell("后文。")]
    original = colab_notebooks._translations
    colab_notebooks._translations = lambda page: {"A figure.": "一张图，见 {ref}`ch-x`。"}
    try:
        result = colab_notebooks.for_colab(notebook, "p", _book(), EDITIONS["zh"])
    finally:
        colab_notebooks._translations = original
    text = result.cells[0].source
    site = EDITIONS["zh"].site
    assert text.startswith("# 标题\n\n> 这个 notebook") and "(ch-x)=" not in text
    assert (f"见《[某章]({site}p.html)》与“[某节]({site}p.html#sec-y)”一节，[“那一节”]({site}p.html#sec-y)，"
            "把式 (12) 代入，式 (12)（Kim 等，2020）。") in text
    assert "$$\nx = 1\n\\tag{12}\n$$" in text
    assert "> **笔记 ↔ 本章**\n>\n> - 一条**强调**" in text
    assert "<details>\n<summary>深入 <code>code</code></summary>\n\n里面。\n\n```python\nx = 1\n```\n\n</details>" in text
    assert f"**[练习 7]({site}p.html#ex-z)**" not in text and "**练习 7**\n\n做一件事。" in text
    assert "<summary>练习 7 的参考答案</summary>\n\n答案。\n\n</details>" in text
    assert result.cells[1] == figure  # code is never touched
    assert result.cells[2].id == "fig-cell-caption"  # the caption right after its figure
    assert result.cells[2].source == f"**图 3**　一张图，见《[某章]({site}p.html)》。"
    assert result.cells[3] == check and result.cells[4].source == "后文。"
    assert result.cells[5].id == "references" and result.cells[5].source == "## 参考文献\n\n- Kim, A. A paper. 2020."


def test_the_english_notebook_is_written_as_the_english_page():
    source = ("# Title\n\nSee {ref}`sec-y` and {eq}`eq-a`; Kim et al. {cite}`k2020` say so. "
              "Others agree (as a note {cite}`k2020`).\n\n```{note}\nA note.\n```\n\n"
              "```{exercise} Try\n:label: ex-z\n\nDo it.\n```\n")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell(source)]
    result = colab_notebooks.for_colab(notebook, "q", _book("en"), EDITIONS["en"])
    text, site = result.cells[0].source, EDITIONS["en"].site
    assert text.startswith("# Title\n\n> This notebook")
    assert f"See [Some section]({site}p.html#sec-y) and [eq. (12)]({site}p.html#equation-eq-a);" in text
    assert "Kim et al. (2020) say so. Others agree (as a note, Kim et al., 2020)." in text
    assert "> **Note**\n>\n> A note." in text and "**Exercise 7**: Try\n\nDo it." in text
    assert result.cells[-1].source == "## References\n\n- Kim, A. A paper. 2020."


@pytest.mark.parametrize("text, expected", [
    ("Adam {cite}`k2020` (the optimiser).", "Adam (Kim et al., 2020; the optimiser)."),
    ("layer norm (a gloss) {cite}`k2020` does.", "layer norm (a gloss; Kim et al., 2020) does."),
    ("see [a page](https://x.org/a) {cite}`k2020`.", "see [a page](https://x.org/a) (Kim et al., 2020)."),
    ("Kim and Lee {cite}`k2020`.", "Kim and Lee (2020)."),
    ("Kim's attention {cite}`k2020` works.", "Kim's attention (2020) works."),
    ("(a long aside {cite}`k2020` goes on.)", "(a long aside (Kim et al., 2020) goes on.)"),
    ("Others. Then it {cite}`k2020`.", "Others. Then it (Kim et al., 2020)."),
])
def test_a_citation_is_written_for_where_it_stands(text, expected):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell("# T\n\n" + text)]
    result = colab_notebooks.for_colab(notebook, "q", _book("en"), EDITIONS["en"])
    assert result.cells[0].source.endswith(expected)


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
    with pytest.raises(colab_notebooks.TranslationError, match=problem):
        colab_notebooks.for_colab(notebook, "p", _book(), EDITIONS["zh"])


@pytest.mark.parametrize("author, expected", [
    ("author = {Shazeer, Noam},", "Shazeer，2019"),
    ("author = {Kingma, Diederik P. and Ba, Jimmy},", "Kingma 和 Ba，2019"),
    ("author = {Dao, Tri and Fu, Daniel Y. and Ermon, Stefano},", "Dao 等，2019"),
    ("author = {Grattafiori, Aaron and others},", "Grattafiori 等，2019"),
    ("author = {{BigScience Workshop}},", "BigScience Workshop，2019"),
    ("title = {{A page}},", "《A page》，2019"),
])
def test_a_citation_is_written_author_year_as_the_pages_write_it(author, expected):
    assert colab_notebooks._citation(f"\n  {author}\n  year = {{2019}}\n") == expected


@pytest.mark.parametrize("author, expected", [
    ("author = {Shazeer, Noam},", "Shazeer, 2019"),
    ("author = {Kingma, Diederik P. and Ba, Jimmy},", "Kingma and Ba, 2019"),
    ("author = {Dao, Tri and Fu, Daniel Y. and Ermon, Stefano},", "Dao et al., 2019"),
    ("author = {Grattafiori, Aaron and others},", "Grattafiori et al., 2019"),
    ("title = {{A page}},", "“A page”, 2019"),
])
def test_an_english_citation_is_written_author_year(author, expected):
    assert colab_notebooks._citation(f"\n  {author}\n  year = {{2019}}\n", "en") == expected
