"""Sphinx extension of the book: two editions, English and Chinese (中文版), from one source.

The English pages are in `_build/html`, the Chinese ones in `_build/html/zh` under the same
paths (tools/editions.py builds them with `language = zh_CN`). This extension:

- puts in the header of every page a plain link to the same page in the other edition
  (`templates/edition-link.html`, listed in the theme's `article_header_end` in `_config.yml`,
  styled by `static/book_i18n.css`); it is a relative `<a href>`, so it works without
  JavaScript and wherever the site is published;
- gives the Chinese edition its own title (`book_edition_titles`);
- keeps display math out of the translation catalogs: math is shared by both editions;
- translates the part captions of `_toc.yml`, which Sphinx alone would leave in English.

Loaded through `sphinx.local_extensions` in `_config.yml`.
"""

from __future__ import annotations

import logging
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.locale import init as init_locale
from sphinx.transforms import SphinxTransform
from sphinx.util.i18n import docname_to_domain

TEMPLATES = Path(__file__).resolve().parent / "templates"
STATIC = Path(__file__).resolve().parent / "static"  # book_i18n.css
TRANSLATION_FOLDER = "zh"  # the Chinese edition inside the English one
# What the link in the header says, in the language of the edition it leads to.
LINKS = {
    "en": {"text": "中文", "lang": "zh-CN", "title": "本页的中文版"},
    "zh_CN": {"text": "English", "lang": "en", "title": "This page in English"},
}


def is_translation(language: str | None) -> bool:
    return (language or "en") != "en"


def other_edition_href(pagename: str, language: str | None) -> str:
    """The relative URL of page `pagename` (e.g. "book/chapters/x") in the other edition."""
    up = "../" * pagename.count("/")
    if is_translation(language):
        return f"{up}../{pagename}.html"
    return f"{up}{TRANSLATION_FOLDER}/{pagename}.html"


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


def setup(app):
    app.add_config_value("book_edition_titles", {}, "html", dict)
    app.add_transform(KeepDisplayMathShared)
    app.add_transform(TranslateTocCaptions)
    app.connect("config-inited", _configure_edition)
    app.add_css_file("book_i18n.css")
    app.connect("html-page-context", _edition_link)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
