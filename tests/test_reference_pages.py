"""The table of contents and the reference pages against the chapters they point to."""

from __future__ import annotations

import re

import pytest
import yaml
from chapters import ROOT, SOURCES, ids, label

BOOK = ROOT / "book"
CHAPTER_LABELS = {label(path) for path in SOURCES}
REF = re.compile(r"\{ref\}`(?:[^`<]*<)?([\w-]+)>?`")


def test_the_toc_lists_exactly_the_chapter_files_in_order():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    listed = [entry["file"] for part in toc["parts"] for entry in part["chapters"]]
    chapters = [entry for entry in listed if entry.startswith("book/chapters/")]
    assert chapters == [path.relative_to(ROOT).with_suffix("").as_posix() for path in SOURCES]


@pytest.mark.parametrize("path", SOURCES, ids=ids(SOURCES))
def test_each_chapter_labels_its_title(path):
    """`(ch-name)=` above the `# Title`: what the reference pages and other chapters link to."""
    assert label(path), f"{path.name}: no `(ch-...)=` label above its title"
    assert label(path).startswith("ch-")


def test_chapter_labels_are_unique():
    assert len(CHAPTER_LABELS) == len(SOURCES)


def test_glossary_terms_have_a_definition_that_links_to_a_chapter():
    text = (BOOK / "glossary.md").read_text()
    body = text.split("```{glossary}", 1)[1].rsplit("```", 1)[0]
    entries = re.split(r"\n(?=\S)", body.strip())
    for entry in entries:
        term, _, definition = entry.partition("\n")
        assert definition.startswith("  "), f"term without a definition: {term}"
        refs = REF.findall(definition)
        assert refs and set(refs) <= CHAPTER_LABELS, f"{term}: links to {refs}"


def test_every_correction_links_to_its_proof():
    text = (BOOK / "notes_errata.md").read_text()
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        title = section.partition("\n")[0]
        refs = REF.findall(section)
        assert refs and set(refs) <= CHAPTER_LABELS, f"{title!r} links to {refs}"


def test_api_page_documents_the_package_itself():
    text = (BOOK / "api.md").read_text()
    assert re.search(r"^\.\. automodule:: attention_book\n\s+:members:", text, re.M)


def test_every_citation_is_in_the_bibliography():
    bib = (BOOK / "references.bib").read_text()
    keys = set(re.findall(r"^@\w+\{([^,]+),", bib, re.M))
    cited = set()
    for path in BOOK.rglob("*.md"):
        for group in re.findall(r"\{cite(?::\w+)?\}`([^`]+)`", path.read_text()):
            cited |= {key.strip() for key in group.split(",")}
    assert cited, "nothing cites the bibliography"
    assert cited <= keys, f"cited but not in references.bib: {sorted(cited - keys)}"
