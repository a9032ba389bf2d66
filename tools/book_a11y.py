"""Sphinx extension of the book: pages that every reader can use, a screen reader's too.

- **Alt texts.** myst-nb writes a figure's image without an alt text, and Sphinx then writes
  the image's file path as its alt (`../../_images/2b4d06….png`), which a screen reader reads
  aloud. Each image of a figure gets the first sentence of its caption, the chapter's own
  words for what the figure shows (the figure cell's metadata), after translation: the
  Chinese edition's alt texts are Chinese. The caption itself stays under the figure.
- **Names that contain what a control shows** (`accessible_names`, applied to every page by
  `templates/layout.html` through tools/book_i18n.py): see its docstring.

Loaded through `sphinx.local_extensions` in `_config.yml`.
"""

from __future__ import annotations

import re

from docutils import nodes
from sphinx.transforms.post_transforms import SphinxPostTransform

# a sentence ends at . ! ? before a space (not "e.g.", "i.e.", "et al.", "Fig.") or at 。！？
_FIRST_SENTENCE = re.compile(r"^(.{8,}?(?:(?<!\be\.g)(?<!\bi\.e)(?<!\bal)(?<!\bFig)[.!?](?=\s)|[。！？]))")


def alt_text(caption: str) -> str:
    """The first sentence of a figure's caption (the whole caption if it has one sentence)."""
    caption = " ".join(caption.split())
    match = _FIRST_SENTENCE.match(caption)
    return match[1] if match else caption


class FigureImagesAreDescribed(SphinxPostTransform):
    """Every image of a figure without an alt text gets its caption's first sentence."""

    default_priority = 900  # after the translation of the captions
    formats = ("html",)

    def run(self, **kwargs) -> None:
        for figure in self.document.findall(nodes.figure):
            captions = [child for child in figure.children if isinstance(child, nodes.caption)]
            if not captions:
                continue
            for image in figure.findall(nodes.image):
                if not image.get("alt"):
                    image["alt"] = alt_text(captions[0].astext())


def accessible_names(html: str) -> str:
    """`html` with each control named by what it shows (WCAG 2.5.3, "label in name").

    A screen reader, or a voice command, names a control by its accessible name; where an
    `aria-label` hides the text that the control shows, the two disagree. myst-nb names every
    hidden cell's toggle "Toggle hidden content" while it shows "Show code cell source", and
    the theme names its search field "Search" while it shows "Search Ctrl+K": without the
    attribute, each is named by its own text. Buttons that show only an icon keep theirs.
    (On a Chinese page it runs before the labels are translated.)
    """
    html = html.replace('<summary aria-label="Toggle hidden content">', "<summary>")
    # The colour-mode button shows only icons: their titles (Light, Dark, ...) would be read as
    # its text, which its name, "Color mode", does not contain; the button's name says it.
    html = re.sub(r'(<i class="theme-switch [^"]*"[^>]*?)\s+title="[^"]*"', r'\1 aria-hidden="true"', html)
    return re.sub(r'(<button class="btn search-button-field[^"]*"[^>]*?) aria-label="[^"]*"', r"\1", html)


def setup(app):
    app.add_post_transform(FigureImagesAreDescribed)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
