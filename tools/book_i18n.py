"""Sphinx extension of the book: two editions, English and Chinese (中文版), from one source.

The English pages are in `_build/html`, the Chinese ones in `_build/html/zh` under the same
paths (tools/editions.py builds them with `language = zh_CN`). This extension:

- puts in the header of every page a plain link to the same page in the other edition
  (`templates/edition-link.html`, listed in the theme's `article_header_end` in `_config.yml`,
  styled by `static/book_i18n.css`); it is a relative `<a href>`, so it works without
  JavaScript and wherever the site is published;
- beside it, links to the PDF of each edition (`templates/pdf-links.html`, `PDF_NAMES`), which
  `make pdf` writes into the site after the HTML build (tools/pdf.py); labelled in the page's
  language;
- makes the Colab button of a chapter page open the chapter's Colab notebook in the page's
  edition (`book/chapters/en/` or `book/chapters/zh/`, plain Markdown, written by
  tools/colab_notebooks.py), and its download button serve that same notebook;
- gives the Chinese edition its own title (`book_edition_titles`);
- keeps display math out of the translation catalogs: math is shared by both editions;
- translates the part captions of `_toc.yml`, which Sphinx alone would leave in English;
- translates the interface labels that Sphinx, the theme and the extensions leave in English on
  a translated page (`INTERFACE_LABELS`): their message catalogs lack these labels, or cannot
  be found for `zh_CN`, or the label is written without a catalog at all; and the labels that a
  package translates otherwise than the edition says them (`PREFERRED_LABELS`: 打印, not 列印).
  The English edition's labels are unchanged: nothing of this runs for it.

Loaded through `sphinx.local_extensions` in `_config.yml`.
"""

from __future__ import annotations

import gettext
import json
import logging
import tempfile
from html import escape
from pathlib import Path

from docutils import nodes
from myst_nb.sphinx_ import HideCodeCellNode
from sphinx import addnodes
from sphinx.locale import get_translation
from sphinx.locale import init as init_locale
from sphinx.transforms import SphinxTransform
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util.i18n import docname_to_domain

from book_a11y import accessible_names  # tools/book_a11y.py: every page, both editions

TEMPLATES = Path(__file__).resolve().parent / "templates"
STATIC = Path(__file__).resolve().parent / "static"  # book_i18n.css
TRANSLATION_FOLDER = "zh"  # the Chinese edition inside the English one
# book/chapters/<edition>/: each edition's Colab notebooks, beside the chapters' notebooks
COLAB_NOTEBOOKS = {"en": "en", "zh_CN": "zh"}
# What the link in the header says, in the language of the edition it leads to.
LINKS = {
    "en": {"text": "中文", "lang": "zh-CN", "title": "本页的中文版"},
    "zh_CN": {"text": "English", "lang": "en", "title": "This page in English"},
}
# The PDF of each edition, by language, at the root of the edition's folder (`make pdf`).
PDF_NAMES = {"en": "attention-executable.pdf", "zh_CN": "attention-executable-zh.pdf"}
# The links to them in the header, in the language of the page (translated by CATALOG).
PDF_LINKS = {
    "en": {"text": "PDF (English)", "title": "The English edition as a PDF", "lang": "en"},
    "zh_CN": {"text": "PDF (Chinese)", "title": "The Chinese edition as a PDF", "lang": "zh-CN"},
}
# The book's own message catalog: the labels below that no package translates.
CATALOG = "book_i18n"
# Interface labels that stay English on a translated page, by the message catalog that
# translates them: each completes the package's own catalog, with labels missing there.
INTERFACE_LABELS = {
    "zh_CN": {
        "sphinx": {  # Sphinx's permalinks, and pydata-sphinx-theme's templates
            "Link to this heading": "链接到此标题",
            "Link to this definition": "链接到此定义",
            "Link to this term": "链接到此术语",
            "Link to this equation": "链接到此公式",
            "Link to this image": "链接到此图片",
            "Link to this table": "链接到此表格",
            "Link to this code": "链接到此代码",
            "Color mode": "颜色模式",
            "System Settings": "跟随系统设置",
        },
        "booktheme": {  # sphinx-book-theme's buttons, and Jupyter Book's search_bar_text
            "Launch interactive content": "启动交互式内容",
            "Launch on": "启动于",
            "logo": "标志",
            "Source repositories": "源码库",
            "Repository": "仓库",
            "Open issue": "创建议题",
            "Search this book...": "搜索本书……",
        },
        "exercise": {"Solution": "解答"},  # sphinx-exercise has only "Solution to"
        # sphinx-togglebutton's own Chinese is in a folder named zh-cn, which gettext does not
        # find for zh_CN.
        "togglebutton": {"Click to show": "点击显示", "Click to hide": "点击隐藏"},
        CATALOG: {
            # myst-nb's hidden code cells ("Show code cell {type}")
            **{f"{verb} code cell {part}": f"{verb_zh}代码单元格{part_zh}"
               for verb, verb_zh in (("Show", "显示"), ("Hide", "隐藏"))
               for part, part_zh in (("source", "源码"), ("content", "内容"),
                                     ("output", "输出"), ("outputs", "输出"))},
            # written in English by templates and scripts (FIXED_LABELS)
            "Toggle hidden content": "显示或隐藏内容",
            "Toggle primary sidebar": "显示或隐藏导航栏",
            "Toggle secondary sidebar": "显示或隐藏目录",
            "Main": "主导航",
            "Page": "本页目录",
            # the links to the PDFs (PDF_LINKS)
            "PDF (English)": "PDF（英文版）",
            "PDF (Chinese)": "PDF（中文版）",
            "The English edition as a PDF": "本书英文版的 PDF",
            "The Chinese edition as a PDF": "本书中文版的 PDF",
            # written by the PDF's LaTeX (tools/book_latex.py)
            "Chapter {number}": "第 {number} 章",
            "Appendix {number}": "附录 {number}",
            "Contents": "目录",
        },
    },
}
# Labels written without a catalog, as `attribute="label"`: by myst-nb's hidden code cells and
# sphinx-book-theme's templates (sidebar toggles, navigation, the printed table of contents).
# Labels a package does translate, but not as the Chinese edition says them: sphinx-book-theme's
# zh_CN catalog has Taiwanese 列印 for "print". These take precedence over the package's own.
PREFERRED_LABELS = {"zh_CN": {"booktheme": {"Print to PDF": "打印为 PDF"}}}
FIXED_LABELS = (("aria-label", "Toggle hidden content"), ("title", "Toggle primary sidebar"),
                ("title", "Toggle secondary sidebar"), ("aria-label", "Main"), ("aria-label", "Page"))
# sphinx-togglebutton's script gives each toggle button an English label when the page loads;
# this one, run after it, translates the label (arguments: the English, the translation, in JSON).
TOGGLE_BUTTON_SCRIPT = """document.addEventListener("DOMContentLoaded", () => {{
  for (const button of document.querySelectorAll(".toggle-button[aria-label]"))
    if (button.getAttribute("aria-label") === {0}) button.setAttribute("aria-label", {1});
}});"""


def is_translation(language: str | None) -> bool:
    return (language or "en") != "en"


def other_edition_href(pagename: str, language: str | None) -> str:
    """The relative URL of page `pagename` (e.g. "book/chapters/x") in the other edition."""
    up = "../" * pagename.count("/")
    if is_translation(language):
        return f"{up}../{pagename}.html"
    return f"{up}{TRANSLATION_FOLDER}/{pagename}.html"


def pdf_links(pagename: str, language: str | None) -> list[dict[str, str]]:
    """The header's links to the PDFs from page `pagename`: its own edition's first."""
    up = "../" * pagename.count("/")
    own, other = ("zh_CN", "en") if is_translation(language) else ("en", "zh_CN")
    folders = {own: up, other: up + ("../" if is_translation(language) else f"{TRANSLATION_FOLDER}/")}
    translate = get_translation(CATALOG) if is_translation(language) else str
    return [{"href": f"{folders[edition]}{PDF_NAMES[edition]}", "lang": PDF_LINKS[edition]["lang"],
             "text": translate(PDF_LINKS[edition]["text"]), "title": translate(PDF_LINKS[edition]["title"])}
            for edition in (own, other)]


class KeepDisplayMathShared(SphinxTransform):
    """Display math is not a message to translate: it is the same in both editions.

    Sphinx would otherwise put each `$$ ... $$` block into the catalogs. Runs before Sphinx's
    own i18n transforms (priority 10 and 20), so the gettext builder and the translation of a
    page both skip it.
    """

    default_priority = 5

    def apply(self, **kwargs) -> None:
        for block in self.document.findall(nodes.math_block):
            block["translatable"] = False


class TablesInDirectivesAreMessages(SphinxTransform):
    """Give the text of a table inside a directive (a dropdown's table) its source file.

    MyST parses a directive's body without setting ``source`` on the paragraphs of a table's
    cells, and Sphinx's i18n skips a paragraph without a source as a built-in message: such a
    table was neither extracted into the catalog nor translated. Runs before Sphinx's own
    i18n transforms (priority 10 and 20).
    """

    default_priority = 5

    def apply(self, **kwargs) -> None:
        for table in self.document.findall(nodes.table):
            source = table.source or self.document.get("source")
            for text in table.findall(nodes.TextElement):
                if not text.source:
                    text.source, text.line = source, table.line or 0


class TranslateTocCaptions(SphinxTransform):
    """Translate the captions of the toctrees that sphinx-external-toc inserts from _toc.yml.

    The gettext builder extracts them into the root document's catalog, but they are inserted
    (priority 100) after Sphinx has translated the document (priority 20), so this applies
    their translations as Sphinx's own transform would have.
    """

    default_priority = 101

    def apply(self, **kwargs) -> None:
        if not is_translation(self.config.language):
            return
        folders = [str(Path(self.env.srcdir, folder)) for folder in self.config.locale_dirs]
        domain = docname_to_domain(self.env.docname, self.config.gettext_compact)
        catalog, found = init_locale(folders, self.config.language, domain)
        if not found:
            return
        for toctree in self.document.findall(addnodes.toctree):
            caption = toctree.get("rawcaption") or toctree.get("caption")
            translated = catalog.gettext(caption) if caption else None
            if translated and translated != caption:
                toctree["rawcaption"] = caption
                toctree.apply_translated_message(caption, translated)


class TranslateHiddenCellPrompts(SphinxPostTransform):
    """Translate the prompts of myst-nb's hidden code cells ("Show code cell source", ...).

    myst-nb puts English words in them ({type}: source, outputs, ...), so they are translated
    whole, after myst-nb has written them (priority 199).
    """

    default_priority = 200
    formats = ("html",)

    def run(self, **kwargs) -> None:
        if not is_translation(self.config.language):
            return
        translate = get_translation(CATALOG)
        for node in self.document.findall(HideCodeCellNode):
            node["prompt_show"] = translate(node["prompt_show"])
            node["prompt_hide"] = translate(node["prompt_hide"])


def translate_fixed_labels(html: str) -> str:
    """`html` with the FIXED_LABELS attributes in the edition's language.

    Only an attribute's exact markup is replaced: a page's text cannot contain it, since its
    quotes are written as `&quot;`.
    """
    translate = get_translation(CATALOG)
    for attribute, english in FIXED_LABELS:
        html = html.replace(f'{attribute}="{english}"', f'{attribute}="{escape(translate(english))}"')
    return html


def _add_interface_catalogs(app, language: str) -> None:
    """Register INTERFACE_LABELS[language] as message catalogs (compiled here, read at once)."""
    from babel.messages.catalog import Catalog
    from babel.messages.mofile import write_mo

    with tempfile.TemporaryDirectory() as folder:
        for domain, labels in INTERFACE_LABELS[language].items():
            catalog = Catalog(locale=language, domain=domain)
            for english, translated in labels.items():
                catalog.add(english, translated)
            mo = Path(folder, language, "LC_MESSAGES", f"{domain}.mo")
            mo.parent.mkdir(parents=True, exist_ok=True)
            with mo.open("wb") as file:
                write_mo(file, catalog)
            app.add_message_catalog(domain, folder)


def _translate_interface(app, config) -> None:
    """The interface labels of a translated edition (before the extensions read their settings)."""
    if config.language not in INTERFACE_LABELS:
        return
    _add_interface_catalogs(app, config.language)
    # sphinx-togglebutton computes its hints when it is set up, before any catalog of ours.
    toggle = get_translation("togglebutton")
    config.togglebutton_hint = toggle(config.togglebutton_hint)
    config.togglebutton_hint_hide = toggle(config.togglebutton_hint_hide)
    options = config.html_theme_options
    if "search_bar_text" in options:  # set by Jupyter Book, so the theme does not translate it
        booktheme = get_translation("booktheme")
        config.html_theme_options = {**options, "search_bar_text": booktheme(options["search_bar_text"])}
    english = "Toggle hidden content"
    script = TOGGLE_BUTTON_SCRIPT.format(json.dumps(english), json.dumps(get_translation(CATALOG)(english), ensure_ascii=False))
    app.add_js_file(None, body=script, priority=600)  # after togglebutton.js (500)


class _Preferred(gettext.NullTranslations):
    """A catalog's translations with some labels of the book's own taking precedence."""

    def __init__(self, labels: dict[str, str], fallback: gettext.NullTranslations) -> None:
        super().__init__()
        self.labels = labels
        self.add_fallback(fallback)

    def gettext(self, message: str) -> str:
        return self.labels.get(message) or super().gettext(message)


def _prefer_book_labels(app) -> None:
    """Put PREFERRED_LABELS in front of the packages' own catalogs (all read by now)."""
    from sphinx.locale import translators

    for domain, labels in PREFERRED_LABELS.get(app.config.language or "en", {}).items():
        key = ("general", domain)  # how sphinx.locale.init files a catalog
        if key in translators:
            translators[key] = _Preferred(labels, translators[key])


def _configure_edition(app, config) -> None:
    config.templates_path = [*config.templates_path, str(TEMPLATES)]
    config.html_static_path = [*config.html_static_path, str(STATIC)]
    title = config.book_edition_titles.get(config.language or "en")
    if title:
        config.html_title = title
    if is_translation(config.language):
        # Sphinx's Chinese search splits words with jieba, which logs its dictionary loading.
        import jieba

        jieba.setLogLevel(logging.WARNING)


def _edition_link(app, pagename, templatename, context, doctree) -> None:
    link = dict(LINKS["zh_CN" if is_translation(app.config.language) else "en"])
    link["href"] = other_edition_href(pagename, app.config.language)
    context["book_edition_link"] = link
    context["book_pdf_links"] = pdf_links(pagename, app.config.language)
    # templates/layout.html passes each page through it
    translated = is_translation(app.config.language)
    context["book_fixed_labels"] = (lambda html: translate_fixed_labels(accessible_names(html))) if translated \
        else accessible_names


def _edition(language: str | None) -> str:
    return COLAB_NOTEBOOKS["zh_CN" if is_translation(language) else "en"]


def _colab_opens_the_editions_notebook(app, pagename, templatename, context, doctree) -> None:
    """The Colab button of a chapter page opens the chapter's Colab notebook in the page's edition.

    The theme links `book/chapters/NN_name.ipynb` (its launch buttons, priority 501), the
    jupytext pair, whose MyST Colab shows as raw text; the Colab notebook is
    `book/chapters/<en|zh>/NN_name.ipynb` (tools/colab_notebooks.py).
    """
    for group in context.get("header_buttons", []):
        if group.get("label") != "launch-buttons":
            continue
        for button in group.get("buttons", []):
            if button.get("text") == "Colab" and button["url"].endswith(".ipynb"):
                folder, name = button["url"].rsplit("/", 1)
                button["url"] = f"{folder}/{_edition(app.config.language)}/{name}"


def _download_serves_the_colab_notebook(app, exception) -> None:
    """The download button's `.ipynb` (`_sources/<page>.ipynb`) is the page's Colab notebook.

    Jupyter, like Colab, renders plain Markdown and no MyST: what a reader downloads should
    read as the page does. The MyST source stays in the repository (`book/chapters/*.md`).
    """
    if exception is not None or app.builder.format != "html":
        return
    edition = _edition(app.config.language)
    for notebook in sorted(Path(app.srcdir, "book", "chapters", edition).glob("*.ipynb")):
        served = Path(app.outdir, "_sources", "book", "chapters", notebook.name)
        if served.exists():
            served.write_bytes(notebook.read_bytes())


def setup(app):
    app.add_config_value("book_edition_titles", {}, "html", dict)
    app.add_config_value("book_site_url", "", "html", str)
    app.add_transform(KeepDisplayMathShared)
    app.add_transform(TablesInDirectivesAreMessages)
    app.add_transform(TranslateTocCaptions)
    app.add_post_transform(TranslateHiddenCellPrompts)
    app.connect("config-inited", _translate_interface, priority=400)
    app.connect("config-inited", _configure_edition)
    app.connect("builder-inited", _prefer_book_labels)
    app.add_css_file("book_i18n.css")
    app.connect("html-page-context", _edition_link)
    app.connect("html-page-context", _colab_opens_the_editions_notebook, priority=510)
    app.connect("build-finished", _download_serves_the_colab_notebook)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
