"""Sphinx extension of the book: its LaTeX, from which `make pdf` makes a PDF of each edition.

tools/pdf.py builds the LaTeX of both editions (English, and Chinese with `language = zh_CN`)
and runs XeLaTeX on it. The look (paper, fonts, code) is set in `_config.yml`
(`sphinx.config.latex_elements`); this extension arranges the book as a book, and does nothing
in any other builder:

- each edition's document is named as its PDF is (`PDF_NAMES` of tools/book_i18n.py), the
  Chinese one with the Chinese title (`book_edition_titles`);
- the root page (book/index) is the opening chapter, unnumbered; its sections are unnumbered too;
- each part of `_toc.yml` ("Chapters", "Part II: Beyond the notes", ...) starts with a part
  page carrying its caption, as translated in the edition; the chapters are numbered 1, 2, ...
  through the parts, as the text refers to them; the pages of the parts after the last chapter
  (appendices, reference pages) are appendices, lettered A, B, ...;
- the bibliography is printed in its page (book/references), not after the last appendix where
  Sphinx would gather it;
- the labels the LaTeX writes itself ("Chapter 1", "Appendix A", "Contents") are in the language
  of the edition, through the book's catalog of fixed labels (tools/book_i18n.py).

Nothing is hidden on paper: Sphinx's LaTeX writer prints the cells that the HTML folds
(`hide-input`, the solutions of the exercises, which follow each exercise), and the dropdowns
(sphinx-design's `{dropdown}`) are printed in full, boxed under their title like admonitions.

Loaded through `sphinx.local_extensions` in `_config.yml`.
"""

from __future__ import annotations

import re
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.builders.latex.nodes import thebibliography
from sphinx.locale import get_translation
from sphinx.transforms import SphinxTransform
from sphinx.transforms.post_transforms import SphinxPostTransform

from book_i18n import CATALOG, PDF_NAMES, is_translation

# The chapters' folder: the parts of _toc.yml after the last one with a chapter are appendices.
CHAPTERS = "book/chapters/"
# The symbols that go through \bookglyph (a font that has them: no "Missing character"): every
# character of the document from these code points on, but for General Punctuation and CJK,
# which the text fonts and xeCJK draw. Written by `_write_fallbacks` beside the .tex file.
FALLBACK_FROM = 0x1D00
NOT_FALLBACK = ((0x2000, 0x206F), (0x2E80, 0xA4CF), (0xF900, 0xFAFF), (0xFE30, 0xFE4F),
                (0xFF00, 0xFFEF), (0x20000, 0x3FFFF))
FALLBACKS_FILE = "bookfallbacks.tex"
# The labels the LaTeX writes, translated on a translated edition (book_i18n's INTERFACE_LABELS).
LABELS = ("Chapter {number}", "Appendix {number}", "Contents")
# TeX that the document's structure needs; the labels are filled in per edition.
PREAMBLE = r"""
%% tools/book_latex.py: the labels of the edition, and the structure of the book.
\makeatletter
\newcommand{\bookchapterlabel}[1]{%(chapter)s}
\newcommand{\bookappendixlabel}[1]{%(appendix)s}
\def\book@appendixapp{\appendixname}%% what \appendix sets \@chapapp to
\newcommand{\bookheadinglabel}{%%
  \ifx\@chapapp\book@appendixapp\bookappendixlabel{\thechapter}\else\bookchapterlabel{\thechapter}\fi}
%% A chapter's heading: its label ("Chapter 1", "Appendix A", in the edition's language), then its
%% title; an unnumbered chapter (the opening one) has its title only.
\def\@makechapterhead#1{\vspace*{10\p@}{\parindent\z@\raggedright\normalfont\sffamily
  \ifnum\c@secnumdepth>\m@ne{\Large\bfseries\bookheadinglabel}\par\nobreak\vskip 12\p@\fi
  {\huge\bfseries #1}\par\nobreak\vskip 24\p@}}
%% The opening chapter and its sections are not numbered; the chapters that follow are.
\newcommand{\bookfrontmatter}{\edef\booksecnumdepth{\the\c@secnumdepth}\setcounter{secnumdepth}{-1}}
\newcommand{\bookmainmatter}{\setcounter{secnumdepth}{\booksecnumdepth}}
%% A part of _toc.yml: a page with its caption, listed in the table of contents.
\newcommand{\bookpart}[1]{\bookmainmatter\cleardoublepage\phantomsection
  \addcontentsline{toc}{part}{#1}\part*{#1}}
%% A symbol (tools/book_latex.py: FALLBACK) in the current font if it has it, else in the
%% fallback fonts of _config.yml: \bookfallbackfont (same weight and shape), \booklastfont.
\newcommand{\bookglyph}[1]{\texorpdfstring{\ifmmode\text{\book@glyph{#1}}\else\book@glyph{#1}\fi}{#1}}
\newcommand{\book@glyph}[1]{\ifnum\XeTeXcharglyph`#1>\z@ #1\else
  {\bookfallbackfont\ifnum\XeTeXcharglyph`#1>\z@ #1\else\booklastfont #1\fi}\fi}
\usepackage{newunicodechar}
\InputIfFileExists{%(fallbacks)s}{}{}
%% The bibliography is printed in its own page, whose title it keeps (no second title).
\renewenvironment{sphinxthebibliography}[1]
  {\let\chapter\@gobbletwo\let\@mkboth\@gobbletwo\begin{thebibliography}{#1}}
  {\end{thebibliography}}
\makeatother
"""


def _is_latex(app) -> bool:
    return getattr(app.builder, "format", None) == "latex"


def _root_doc(app) -> str:
    return app.config.root_doc


class MarkTocParts(SphinxTransform):
    """Keep each root toctree's caption on its wrapper, which outlives the toctree in LaTeX.

    The LaTeX builder replaces each toctree by the documents it lists, so the caption of a part
    would be lost. Runs after tools/book_i18n.py has translated the captions (priority 101).
    """

    default_priority = 102

    def apply(self, **kwargs) -> None:
        if not _is_latex(self.app) or self.env.docname != _root_doc(self.app):
            return
        for toctree in self.document.findall(addnodes.toctree):
            wrapper = toctree.parent
            if isinstance(wrapper, nodes.compound) and toctree.get("caption"):
                wrapper["book_part"] = toctree["caption"]


class MarkBibliographyPage(SphinxPostTransform):
    """Note the page whose citations Sphinx is about to gather at the end of the document."""

    default_priority = 749  # just before BibliographyTransform
    formats = ("latex",)

    def run(self, **kwargs) -> None:
        # Searched from each page down: the inlined pages' nodes keep their old parents.
        for page in self.document.findall(addnodes.start_of_file):
            if next(iter(page.findall(nodes.citation)), None) is not None:
                self.document["book_bibliography_page"] = page["docname"]  # the innermost wins


class ArrangeTheBook(SphinxPostTransform):
    """The whole book, as the LaTeX builder assembled it from the root page, arranged as a book.

    Before (the root page's toctrees replaced by the pages they list)::

        <document>
            <section> title, introduction, sections ...
                <compound book_part="Chapters"> <start_of_file> <section> ... (a chapter)
                ...

    After::

        <document>
            <section> title (the document's title: the writer prints it on the title page)
                <raw> \\bookfrontmatter
                <section> title, introduction, sections (the opening chapter)
            <raw> \\bookpart{Chapters}
            <start_of_file> <section> ... (a chapter)
            ...
            <raw> \\appendix \\bookpart{Appendices} (the first part after the last chapter)
            <start_of_file> <section> ... (an appendix)
    """

    default_priority = 800  # after Sphinx gathers the citations (BibliographyTransform, 750)
    formats = ("latex",)

    def run(self, **kwargs) -> None:
        if not any(self.document.findall(addnodes.start_of_file)):
            return  # not a document assembled from the root page
        parts = [node for node in self.document.findall(nodes.compound) if "book_part" in node]
        root = next(iter(self.document.findall(nodes.section)), None)
        if root is None or not parts:
            return
        for part in parts:
            part.parent.remove(part)
        self._open_with_the_root_page(root)
        last_with_chapters = max((number for number, part in enumerate(parts) if any(
            start["docname"].startswith(CHAPTERS) for start in part.findall(addnodes.start_of_file))),
            default=len(parts) - 1)
        for number, part in enumerate(parts):
            tex = rf"\bookpart{{{self._escape(part['book_part'])}}}"
            if number == last_with_chapters + 1:
                tex = r"\appendix" + "\n" + tex
            self.document += nodes.raw("", tex + "\n", format="latex")
            self.document.extend(part.children)
        self._bibliography_in_its_page()

    def _open_with_the_root_page(self, root: nodes.section) -> None:
        """The root page's content as an unnumbered chapter, under its own title.

        The writer takes the first title of the document for the title page and prints no
        heading for it: a copy of that title heads the opening chapter.
        """
        title, *content = root.children
        chapter = nodes.section("", title.deepcopy(), *content)
        root.children = [title]
        title.parent = root
        root += nodes.raw("", "\\bookfrontmatter\n", format="latex")
        root += chapter

    def _bibliography_in_its_page(self) -> None:
        """Move the bibliography that Sphinx gathered at the end into the page that shows it."""
        docname = self.document.get("book_bibliography_page")
        page = next((next(iter(start.findall(nodes.section)), None)
                     for start in self.document.findall(addnodes.start_of_file)
                     if start["docname"] == docname), None)
        if page is None:
            return
        for bibliography in list(self.document.findall(thebibliography)):
            bibliography.parent.remove(bibliography)
            page += bibliography

    @staticmethod
    def _escape(text: str) -> str:
        from sphinx.util.texescape import escape

        return escape(text)


class ExerciseReferencesAcrossPages(SphinxPostTransform):
    """A reference to an exercise of another page, as sphinx-exercise writes one within a page.

    sphinx-exercise numbers the exercises itself ("Exercise 16", as in the HTML) and labels each
    `exercise:<label>`; a reference from another page would ask LaTeX for a number it never set
    (`\\ref{<page>:<label>}`, undefined). It becomes sphinx-exercise's own reference, with the
    number Sphinx resolved.
    """

    default_priority = 23  # after sphinx-exercise's ResolveLinkTextToSolutions (22)
    formats = ("latex",)

    def run(self, **kwargs) -> None:
        from sphinx_exercise.nodes import exercise_enumerable_node, exercise_latex_number_reference

        registry = getattr(self.env, "sphinx_exercise_registry", {})
        for node in list(self.document.findall(addnodes.number_reference)):
            label = node.get("refuri", "").partition("#")[2]
            if label and isinstance(registry.get(label, {}).get("node"), exercise_enumerable_node):
                reference = exercise_latex_number_reference("", "", *node.children, refid=label)
                node.replace_self(reference)


class DropdownsAsAsides(SphinxPostTransform):
    """A dropdown (sphinx-design's `{dropdown}`) as a box with its title, as an admonition is.

    Paper cannot unfold it: its content is printed in full. sphinx-design would print the title
    as a bare run-in heading, with nothing to show where the aside ends. A dropdown that holds
    a table is printed unframed, under its title as a heading: a framed box splits across
    pages only between lines, and a table near a page break pushed such a box off the page.
    """

    default_priority = 190  # before sphinx-design's own transforms (199, HTML only)
    formats = ("latex",)

    def run(self, **kwargs) -> None:
        from sphinx_design.shared import is_component

        for dropdown in list(self.document.findall(lambda node: is_component(node, "dropdown"))):
            children = list(dropdown.children)
            if dropdown.get("has_title") and children and isinstance(children[0], nodes.rubric):
                title = nodes.title("", "", *children.pop(0).children)
            else:
                title = nodes.title("", "")
            if any(True for _ in dropdown.findall(nodes.table)):
                heading = nodes.rubric("", "", *title.children)
                dropdown.replace_self(nodes.container("", heading, *children, classes=["dropdown"]))
                continue
            aside = nodes.admonition("", title, *children, classes=["dropdown"])
            dropdown.replace_self(aside)


class ColumnWidthsForPaper(SphinxPostTransform):
    """Give every table without set widths column widths from its content, as a browser does.

    Without widths, Sphinx's LaTeX sizes a short table's columns by a rule that can leave a
    column narrower than a formula or code it cannot break, and does not wrap at all in a long
    table (`longtable` with `l` columns), which then runs off the page. With widths, every column
    wraps within the text block. The widths follow the automatic layout of HTML tables: each
    column at least as wide as its longest unbreakable word, at most as its longest cell, and the
    room left shared in proportion to what each column would still take.
    """

    default_priority = 810
    formats = ("latex",)
    LINE = 100  # about as many characters as fit on a line of the text block
    # Where a line may break in a cell: spaces, and in code and math what the preamble allows.
    BREAKS = re.compile(r"[\s_,./;]+")

    def run(self, **kwargs) -> None:
        for table in self.document.findall(nodes.table):
            tgroup = next(iter(table.findall(nodes.tgroup)), None)
            if tgroup is None or "colwidths-given" in table["classes"]:
                continue
            colspecs = [node for node in tgroup.children if isinstance(node, nodes.colspec)]
            rows = list(tgroup.findall(nodes.row))
            if not colspecs or any(len(row) != len(colspecs) for row in rows):
                continue  # merged cells: left to Sphinx
            columns = list(zip(*[[" ".join(entry.astext().split()) for entry in row] for row in rows]))
            widest = [max(len(cell) for cell in column) + 1 for column in columns]
            narrowest = [max(len(word) for cell in column for word in self.BREAKS.split(cell) + [""]) + 1
                         for column in columns]
            for colspec, width in zip(colspecs, self.widths(narrowest, widest)):
                colspec["colwidth"] = width
            table["classes"].append("colwidths-given")

    @classmethod
    def widths(cls, narrowest: list[int], widest: list[int]) -> list[int]:
        """Column widths (in characters) between `narrowest` and `widest`, filling LINE if possible."""
        low, high = sum(narrowest), sum(widest)
        if high <= cls.LINE:
            return widest
        if low >= cls.LINE:
            return narrowest
        share = (cls.LINE - low) / (high - low)
        return [round(least + (most - least) * share) for least, most in zip(narrowest, widest)]


def _labels(app) -> dict[str, str]:
    """LABELS in the edition's language, as TeX (`{number}` becomes the macro's argument)."""
    translate = get_translation(CATALOG)
    return {label: str(translate(label)) for label in LABELS}


def _configure(app, config) -> None:
    """The LaTeX settings that depend on the edition (config-inited, after book_i18n's catalogs)."""
    labels = _labels(app)
    preamble = PREAMBLE % {
        "chapter": labels["Chapter {number}"].replace("{number}", "#1"),
        "appendix": labels["Appendix {number}"].replace("{number}", "#1"),
        "fallbacks": FALLBACKS_FILE,
    }
    elements = dict(config.latex_elements)
    elements["preamble"] = elements.get("preamble", "") + preamble
    if not is_translation(config.language):
        # xeCJK takes the curly quotes, dashes and ellipsis for Chinese punctuation and draws
        # them full width with the Chinese font: in English text they are Latin punctuation.
        elements["preamble"] += ("\\xeCJKDeclareCharClass{Default}"
                                 "{\"00B7, \"2013, \"2014, \"2018, \"2019, \"201C, \"201D, \"2026}\n")
    config.latex_elements = elements


def _name_the_document(app, env, docnames) -> None:
    """The edition's document: its file name and title (after Jupyter Book set its own)."""
    if not _is_latex(app):
        return
    language = app.config.language or "en"
    target = PDF_NAMES["zh_CN" if is_translation(language) else "en"].removesuffix(".pdf") + ".tex"
    documents = app.config.latex_documents  # Jupyter Book's: the title of _config.yml
    author = documents[0][3] if documents else app.config.author
    title = app.config.book_edition_titles.get(language) or (documents[0][2] if documents else "")
    app.config.latex_documents = [(_root_doc(app), target, title, author, "manual", False)]
    # The writer titles the table of contents with the first toctree's caption ("Chapters").
    contents = _labels(app)["Contents"]
    app.builder.get_contentsname = lambda indexfile: contents


def fallback_characters(tex: str) -> list[str]:
    """The characters of `tex` that \\bookglyph draws (FALLBACK_FROM, NOT_FALLBACK)."""
    return sorted({character for character in tex if ord(character) >= FALLBACK_FROM
                   and not any(low <= ord(character) <= high for low, high in NOT_FALLBACK)})


def _write_fallbacks(app, exception) -> None:
    """Beside each .tex file, the \\newunicodechar of each symbol it contains (build-finished)."""
    if exception is not None or not _is_latex(app):
        return
    for entry in app.config.latex_documents:
        tex = Path(app.outdir, entry[1])
        if tex.is_file():
            lines = [f"\\newunicodechar{{{character}}}{{\\bookglyph{{{character}}}}}  % U+{ord(character):04X}"
                     for character in fallback_characters(tex.read_text(encoding="utf-8"))]
            Path(app.outdir, FALLBACKS_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")


def setup(app):
    app.add_transform(MarkTocParts)
    app.add_post_transform(MarkBibliographyPage)
    app.add_post_transform(ExerciseReferencesAcrossPages)
    app.add_post_transform(DropdownsAsAsides)
    app.add_post_transform(ArrangeTheBook)
    app.add_post_transform(ColumnWidthsForPaper)
    app.connect("config-inited", _configure, priority=600)  # after book_i18n (400, 500)
    app.connect("env-before-read-docs", _name_the_document)
    app.connect("build-finished", _write_fallbacks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
