"""Sphinx extension of the book: pages that load nothing from the internet, and a quiet console.

sphinx-thebe, an extension Jupyter Book 1 always loads, puts on every page an inline script
that declares ``const THEBE_JS_URL`` (a CDN address) and ``sphinx-thebe.js``. The book has no
Thebe (live code) button, and the declaration is emitted twice, which the browser reports as
"Identifier 'THEBE_JS_URL' has already been declared". This extension drops those assets from
every page. Loaded through ``sphinx.local_extensions`` in ``_config.yml``.
"""

from __future__ import annotations

import os


def _is_thebe(asset) -> bool:
    name = os.fspath(getattr(asset, "filename", None) or "")
    body = getattr(asset, "attributes", {}).get("body", "")
    return "thebe" in os.path.basename(name).lower() or "THEBE_JS_URL" in body


def _drop_thebe_assets(app, pagename, templatename, context, doctree):
    for key in ("script_files", "css_files"):
        if key in context:
            context[key] = [asset for asset in context[key] if not _is_thebe(asset)]


def setup(app):
    app.connect("html-page-context", _drop_thebe_assets, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
