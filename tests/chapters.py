"""The book's chapters as the tests see them: found in book/chapters, never listed by hand."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "book" / "chapters").glob("*.md"))  # the chapters, in number order
NOTEBOOKS = sorted((ROOT / "book" / "chapters").glob("*.ipynb"))
_LABEL = re.compile(r"^\(([\w-]+)\)=\s*\n#\s", re.M)  # `(ch-name)=` right above `# Title`


def label(path: Path) -> str | None:
    """The label a chapter gives its title (``ch-name``), or None."""
    match = _LABEL.search(path.read_text())
    return match[1] if match else None


def ids(paths: list[Path]) -> list[str]:
    """Test ids: the file names without their suffix."""
    return [path.stem for path in paths]


def header_links(page: Path, selector: str) -> list | None:
    """The links of a built page's article header that match ``selector`` (CSS), or None for a
    file that is no page (the index.html that redirects)."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    return None if soup.find("html") is None else soup.select(f".bd-header-article {selector}")
