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
