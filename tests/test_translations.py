"""The Chinese edition's machinery, on small catalogs made here (no book build needed).

The gate (tools/translations.py `check`) must name each catalog that is stale, or that has
untranslated, fuzzy or obsolete entries, or a translation that changes the markup; `update`
must merge a new template as sphinx-intl does; the Chinese build compiles exactly the finished
translations; and each page's link leads to the same page in the other edition.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from babel.messages.catalog import Catalog
from babel.messages.mofile import read_mo
from babel.messages.pofile import read_po, write_po

import book_i18n  # tools/book_i18n.py
import editions  # tools/editions.py
import translations  # tools/translations.py

INTRO = "Attention lets every query look at every key, as in {ref}`ch-sdpa`."
FORMULA = "The weights $w_{ij}$ of `softmax` sum to 1."
TABLE_CELL = "`(T, T)`"
TITLE = "Masked attention"


def _write(path: Path, messages: dict, *, fuzzy=(), obsolete: dict | None = None, locale="zh_CN"):
    """A catalog (.po, or .pot when `locale` is None) holding `messages` (msgid -> msgstr)."""
    catalog = Catalog(locale=locale)
    for msgid, msgstr in messages.items():
        catalog.add(msgid, msgstr, flags=("fuzzy",) if msgid in fuzzy else ())
    for msgid, msgstr in (obsolete or {}).items():
        catalog.add(msgid, msgstr)
        catalog.obsolete[msgid] = catalog[msgid]
        del catalog[msgid]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as file:
        write_po(file, catalog)
    return path


def _template(folder: Path, document: str, msgids) -> Path:
    return _write(folder / f"{document}.pot", dict.fromkeys(msgids, ""), locale=None)


def _read(path: Path):
    with path.open("rb") as file:
        return read_po(file)


DONE = {INTRO: "注意力让每个查询都能看到每个键，见 {ref}`ch-sdpa`。",
        FORMULA: "`softmax` 的权重 $w_{ij}$ 之和为 1。",
        TABLE_CELL: TABLE_CELL,
        TITLE: "掩码注意力"}


@pytest.fixture
def book(tmp_path):
    """Templates of two documents and their complete, current catalogs."""
    templates, catalogs = tmp_path / "gettext", tmp_path / "locales" / "zh_CN" / "LC_MESSAGES"
    _template(templates, "book/chapters/05_masked", DONE)
    _template(templates, "book/index", [TITLE])
    _write(catalogs / "book/chapters/05_masked.po", DONE)
    _write(catalogs / "book/index.po", {TITLE: "掩码注意力"})
    return templates, catalogs


def _kinds(findings) -> dict[str, dict[str, int]]:
    """{catalog: {first word of the problem: count}}."""
    table: dict[str, dict[str, int]] = {}
    for finding in findings:
        table.setdefault(Path(finding.catalog).name, {})[finding.kind.split()[0]] = finding.count
    return table


def test_complete_current_catalogs_pass(book):
    assert translations.audit(*book) == []
    assert "all translated and current" in translations.report([], 2, 5)


def test_untranslated_and_fuzzy_entries_are_counted_per_catalog(book):
    templates, catalogs = book
    _write(catalogs / "book/chapters/05_masked.po", {**DONE, INTRO: "", FORMULA: DONE[FORMULA], TITLE: "掩码注意力"},
           fuzzy=(FORMULA, TITLE))
    assert _kinds(translations.audit(templates, catalogs)) == {"05_masked.po": {"untranslated": 1, "fuzzy": 2}}


def test_a_new_paragraph_makes_the_catalog_stale(book):
    templates, catalogs = book
    _template(templates, "book/chapters/05_masked", [*DONE, "A new paragraph."])
    assert _kinds(translations.audit(templates, catalogs)) == {"05_masked.po": {"new": 1}}


def test_a_changed_or_removed_paragraph_makes_the_catalog_stale(book):
    templates, catalogs = book
    changed = [INTRO.replace("every key", "each key"), FORMULA, TABLE_CELL]  # TITLE removed
    _template(templates, "book/chapters/05_masked", changed)
    assert _kinds(translations.audit(templates, catalogs)) == {"05_masked.po": {"new": 1, "entries": 2}}


def test_a_new_document_and_a_removed_document_are_stale(book):
    templates, catalogs = book
    _template(templates, "book/chapters/09_new", ["Tiles", "Online softmax"])
    (templates / "book/index.pot").unlink()
    findings = translations.audit(templates, catalogs)
    assert _kinds(findings) == {"09_new.po": {"messages": 2}, "index.po": {"entries": 1}}
    assert all("stale" in finding.kind for finding in findings)


def test_obsolete_entries_are_found(book):
    templates, catalogs = book
    _write(catalogs / "book/index.po", {TITLE: "掩码注意力"}, obsolete={"Old title": "旧标题"})
    assert _kinds(translations.audit(templates, catalogs)) == {"index.po": {"obsolete": 1}}


@pytest.mark.parametrize("translation", [
    "注意力让每个查询都能看到每个键，见 {ref}`ch-why-scale`。",  # another target
    "注意力让每个查询都能看到每个键。",  # the reference dropped
    "注意力让每个查询都能看到每个键，见 {ref}`ch-sdpa`。 #noqa",  # Sphinx's check silenced
])
def test_a_translation_must_keep_the_references(book, translation):
    templates, catalogs = book
    _write(catalogs / "book/chapters/05_masked.po", {**DONE, INTRO: translation})
    assert _kinds(translations.audit(templates, catalogs)) == {"05_masked.po": {"translations": 1}}


@pytest.mark.parametrize("translation", [
    "`softmax` 的权重 $w_{ji}$ 之和为 1。",  # math changed
    "softmax 的权重 $w_{ij}$ 之和为 1。",  # code lost its backticks
    "`Softmax` 的权重 $w_{ij}$ 之和为 1。",  # code changed
])
def test_a_translation_must_keep_math_and_code(book, translation):
    templates, catalogs = book
    _write(catalogs / "book/chapters/05_masked.po", {**DONE, FORMULA: translation})
    assert _kinds(translations.audit(templates, catalogs)) == {"05_masked.po": {"translations": 1}}


def test_a_reference_may_get_a_translated_title():
    english = "See {ref}`the masking chapter <ch-masked>` and :func:`attention_book.softmax`."
    chinese = "见 {ref}`掩码一章 <ch-masked>` 和 :func:`attention_book.softmax`。"
    assert translations.markup(english) == translations.markup(chinese)
    assert translations.markup(english) != translations.markup(chinese.replace("ch-masked", "ch-sdpa"))


def test_check_on_the_command_line_names_the_catalogs_and_the_fix(book, capsys):
    templates, catalogs = book
    assert translations.main(["check", "--templates", str(templates), "--catalogs", str(catalogs)]) == 0
    assert "2 catalogs, 5 messages, all translated and current" in capsys.readouterr().out
    _write(catalogs / "book/index.po", {TITLE: ""})
    assert translations.main(["check", "--templates", str(templates), "--catalogs", str(catalogs)]) == 1
    out = capsys.readouterr().out
    assert "index.po: 1 untranslated" in out and "run `make translations`, then translate" in out
    # One document alone: the other one's problems are not reported.
    assert translations.main(["check", "book/chapters/05_masked", "--templates", str(templates),
                              "--catalogs", str(catalogs)]) == 0


def test_stats_count_finished_fuzzy_and_missing_translations(book, capsys):
    _, catalogs = book
    _write(catalogs / "book/index.po", {TITLE: "掩码注意力", INTRO: DONE[INTRO], FORMULA: ""}, fuzzy=(INTRO,))
    assert translations.progress(catalogs) == [("book/chapters/05_masked", 4, 4, 0), ("book/index", 3, 1, 1)]
    assert translations.main(["stats", "--catalogs", str(catalogs)]) == 0
    assert "5 of    7 translated" in capsys.readouterr().out


def test_update_merges_new_templates_and_tidies(book):
    templates, catalogs = book
    _template(templates, "book/chapters/05_masked",
              [INTRO.replace("every key", "each key"), FORMULA, "`(N, h, T, d_k)`", "`(T, T_k)`",
               "A new paragraph."])
    _template(templates, "book/chapters/09_new", ["Tiles"])
    (templates / "book/index.pot").unlink()

    translations.update(templates, catalogs)

    assert not (catalogs / "book/index.po").exists(), "the catalog of a removed document stays"
    assert _read(catalogs / "book/chapters/09_new.po")["Tiles"].string == ""
    assert "#, fuzzy" not in (catalogs / "book/chapters/09_new.po").read_text(), "a fuzzy header"
    merged = _read(catalogs / "book/chapters/05_masked.po")
    changed = merged[INTRO.replace("every key", "each key")]
    assert changed.fuzzy and changed.string == DONE[INTRO], "a changed paragraph keeps its draft, fuzzy"
    assert merged[FORMULA].string == DONE[FORMULA] and not merged[FORMULA].fuzzy
    for same in ("`(N, h, T, d_k)`", "`(T, T_k)`"):  # the second one sphinx-intl drafts from `(T, T)`
        assert merged[same].string == same and not merged[same].fuzzy, "nothing to translate: filled"
    assert merged["A new paragraph."].string == ""
    assert not merged.obsolete, "obsolete entries stay"
    assert _kinds(translations.audit(templates, catalogs)) == {
        "05_masked.po": {"untranslated": 1, "fuzzy": 1}, "09_new.po": {"untranslated": 1}}


def test_only_finished_translations_are_compiled_and_stale_ones_vanish(tmp_path):
    locales = tmp_path / "locales"
    _write(locales / "zh_CN/LC_MESSAGES/book/index.po", {TITLE: "掩码注意力", FORMULA: DONE[FORMULA], INTRO: ""},
           fuzzy=(FORMULA,))
    target = tmp_path / "compiled"
    stale = target / "zh_CN/LC_MESSAGES/book/removed.mo"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"")

    assert editions.compile_catalogs(locales, "zh_CN", target) == 1
    assert not stale.exists()
    with (target / "zh_CN/LC_MESSAGES/book/index.mo").open("rb") as file:
        compiled = {message.id: message.string for message in read_mo(file) if message.id}
    assert compiled == {TITLE: "掩码注意力"}, "a fuzzy or empty translation must not reach the book"


@pytest.mark.parametrize("page", ["book/index", "book/chapters/05_masked_attention", "search", "genindex"])
def test_each_page_links_to_the_same_path_in_the_other_edition(tmp_path, page):
    english = tmp_path / f"{page}.html"
    chinese = tmp_path / book_i18n.TRANSLATION_FOLDER / f"{page}.html"
    to_chinese = (english.parent / book_i18n.other_edition_href(page, "en")).resolve()
    to_english = (chinese.parent / book_i18n.other_edition_href(page, "zh_CN")).resolve()
    assert (to_chinese, to_english) == (chinese.resolve(), english.resolve())


def test_the_configuration_keeps_one_catalog_per_document():
    import yaml

    config = yaml.safe_load((translations.ROOT / "_config.yml").read_text(encoding="utf-8"))["sphinx"]
    assert config["config"]["gettext_compact"] is False, "one catalog per document, for parallel work"
    assert config["config"]["locale_dirs"] == ["locales"]
    assert translations.CATALOGS == translations.ROOT / "locales" / editions.LANGUAGE / "LC_MESSAGES"
    assert "book_i18n" in config["local_extensions"]
