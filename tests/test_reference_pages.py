"""The reference pages: notation, glossary, where the notes were wrong, API, bibliography."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
CHAPTER_LABELS = {
    "ch-what-is-attention", "ch-sdpa", "ch-why-scale", "ch-softmax-gradient",
    "ch-masked-attention", "ch-multihead", "ch-bert",
}
REF = re.compile(r"\{ref\}`(?:[^`<]*<)?([\w-]+)>?`")


def _toc_part(caption: str) -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    (part,) = [p for p in toc["parts"] if p["caption"] == caption]
    return [entry["file"] for entry in part["chapters"]]


def test_reference_part_of_the_toc():
    assert _toc_part("Reference") == [
        "book/notation", "book/glossary", "book/notes_errata", "book/api", "book/references",
    ]


def test_chapter_labels_are_the_ones_the_reference_pages_link_to():
    """Each chapter file defines one of the labels the reference pages use."""
    for path in sorted((BOOK / "chapters").glob("*.md")):
        labels = set(re.findall(r"^\(([\w-]+)\)=\s*$", path.read_text(), re.M))
        assert labels & CHAPTER_LABELS, f"{path.name} defines none of {sorted(CHAPTER_LABELS)}"


def test_glossary_maps_at_least_15_terms_to_chinese_and_to_a_chapter():
    text = (BOOK / "glossary.md").read_text()
    body = text.split("```{glossary}", 1)[1].rsplit("```", 1)[0]
    entries = re.split(r"\n(?=\S)", body.strip())
    assert len(entries) >= 15, len(entries)
    chinese = re.compile(r"[\u4e00-\u9fff]")
    for entry in entries:
        term, _, definition = entry.partition("\n")
        assert definition.startswith("  "), f"term without a definition: {term}"
        refs = REF.findall(definition)
        assert refs and set(refs) <= CHAPTER_LABELS, f"{term}: links to {refs}"
    with_chinese = [e.partition("\n")[0] for e in entries if chinese.search(e.partition("\n")[0])]
    assert len(with_chinese) >= 15, with_chinese
    for term in ("注意力机制", "缩放点积注意力", "查询", "键", "值", "掩码", "多头注意力", "点积",
                 "方差", "梯度", "线性变换", "权重", "上下文向量", "相似度", "归一化"):
        assert term in body, term


def test_every_correction_links_to_its_proof():
    text = (BOOK / "notes_errata.md").read_text()
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    assert len(sections) >= 5
    for section in sections:
        title = section.partition("\n")[0]
        refs = REF.findall(section)
        assert refs and set(refs) <= CHAPTER_LABELS, f"{title!r} links to {refs}"
    linked = set(REF.findall(text))
    for label in ("ch-softmax-gradient", "ch-why-scale", "ch-multihead", "ch-bert"):
        assert label in linked, f"the design's correction proved in {label} is missing"


def test_notation_names_every_symbol_with_its_shape():
    text = (BOOK / "notation.md").read_text()
    for symbol in (r"$N$", r"$T$", r"$T_q$", r"$T_k$", r"$d_\text{model}$", r"$h$", r"$d_k$",
                   r"$d_v$", r"$Q$", r"$K$", r"$V$", r"$W^Q, W^K$", r"$W^V$", r"$W^O$", r"$M$",
                   r"$X$", r"$w_{ij}$", r"$A = \softmax(S + M)$"):
        rows = [line for line in text.splitlines() if line.startswith(f"| {symbol}")]
        assert rows, f"no row for {symbol}"
    assert "(N, h, T, d_k)" in text and "True" in text


def test_api_page_documents_the_package_itself():
    text = (BOOK / "api.md").read_text()
    assert re.search(r"^\.\. automodule:: attention_book\n\s+:members:", text, re.M)


def test_bibliography_has_the_papers_the_chapters_cite():
    bib = (BOOK / "references.bib").read_text()
    keys = set(re.findall(r"^@\w+\{([^,]+),", bib, re.M))
    assert {"vaswani2017attention", "devlin2019bert"} <= keys
    cited = set()
    for path in BOOK.rglob("*.md"):
        for group in re.findall(r"\{cite(?::\w+)?\}`([^`]+)`", path.read_text()):
            cited |= {key.strip() for key in group.split(",")}
    assert cited, "nothing cites the bibliography"
    assert cited <= keys, f"cited but not in references.bib: {sorted(cited - keys)}"
    assert "vaswani2017attention" in cited
