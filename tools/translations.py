"""The Chinese edition's catalogs: update them from the English source, and check them.

    python tools/translations.py update           `make translations`
    python tools/translations.py update book/chapters/03_why_scale --build /tmp/b
                                                  only this catalog, extracting into /tmp/b
    python tools/translations.py check            `make translations-check` (in `make test`)
    python tools/translations.py check book/index ...   only these documents (quicker to read)
    python tools/translations.py stats            how far each catalog is (no extraction)

The English pages are the source. The gettext builder (tools/editions.py gettext) extracts
their messages into one template per document, `_build/gettext/<document>.pot`; each has its
catalog, `locales/zh_CN/LC_MESSAGES/<document>.po`, in which translators write the `msgstr`s.

`update` regenerates the templates and merges them into the catalogs with sphinx-intl: a new
paragraph arrives untranslated, a changed one arrives "fuzzy" with the old translation as a
draft, a removed one is dropped, and so is the catalog of a removed document. Messages with
nothing to translate (only code, math, numbers and symbols) are filled with themselves.

`check` regenerates the templates and fails, naming each catalog and how many entries, when a
catalog is stale (its messages are not the template's: the English changed since the last
`update`), or has an untranslated, fuzzy or obsolete entry, or a translation that does not
keep its message's markup exactly: the same roles and targets ({ref}, {eq}, {cite}, ...),
inline math, inline code and link targets, and no `#noqa` (which would silence Sphinx's own
check of references).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LANGUAGE = "zh_CN"
CATALOGS = ROOT / "locales" / LANGUAGE / "LC_MESSAGES"
FIX = "run `make translations`, then translate (see the translation guide)"

# Markup a translation must keep exactly, in the order it is taken out of a message.
_MARKUP = [
    ("role", re.compile(r"\{([\w:.+-]+)\}`([^`]*)`")),        # MyST: {ref}`text <target>`
    ("role", re.compile(r":([\w:.+-]+):`([^`]*)`")),          # reStructuredText (docstrings)
    ("math", re.compile(r"\$\$(.+?)\$\$|(?<![\\$])\$([^$\n]+?)\$", re.S)),
    ("code", re.compile(r"``(.+?)``|`([^`]+)`")),
    ("link", re.compile(r"\]\(([^)\s]*)\)")),
]
_EXPLICIT_TARGET = re.compile(r"<([^<>]+)>\s*$")
_WORD = re.compile(r"[^\W\d_]", re.U)  # a letter of any script


def markup(text: str) -> Counter:
    """The markup of a message: roles with their targets, inline math, inline code, link targets.

    A role's visible text may be translated (`{ref}`掩码 <ch-masked-attention>``): only its
    name and target count.
    """
    found: Counter = Counter()
    for kind, pattern in _MARKUP:
        for match in pattern.finditer(text):
            groups = [g for g in match.groups() if g is not None]
            if kind == "role":
                name, content = groups
                target = _EXPLICIT_TARGET.search(content)
                found[(kind, name, target[1] if target else content)] += 1
            else:
                found[(kind, groups[0] if groups else match[0])] += 1
        text = pattern.sub(" ", text)
    return found


def has_words(text: str) -> bool:
    """Whether a message has words to translate once its markup is taken out."""
    for _, pattern in _MARKUP:
        text = pattern.sub(" ", text)
    return bool(_WORD.search(text))


# --- reading catalogs --------------------------------------------------------------------------
def read_catalog(path: Path):
    from babel.messages.pofile import read_po

    with path.open("rb") as file:
        return read_po(file, locale=LANGUAGE if path.suffix == ".po" else None, abort_invalid=True)


def _entries(catalog) -> list:
    return [message for message in catalog if message.id]  # the header's id is ""


def _key(message) -> tuple:
    return (message.context, message.id)


def _documents(folder: Path, suffix: str) -> dict[str, Path]:
    return {path.relative_to(folder).with_suffix("").as_posix(): path
            for path in sorted(folder.rglob(f"*{suffix}"))}


# --- the check ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Finding:
    """One problem of one catalog: `kind` of `count` entries (`examples`: their first words)."""

    catalog: str
    kind: str
    count: int
    examples: tuple[str, ...] = ()

    def __str__(self) -> str:
        text = f"{self.catalog}: {self.count} {self.kind}"
        return text + "".join(f"\n    {example}" for example in self.examples)


def _examples(messages, limit: int = 2) -> tuple[str, ...]:
    shorten = lambda text: text if len(text) <= 70 else text[:67] + "..."  # noqa: E731
    return tuple(repr(shorten(m if isinstance(m, str) else m.id)) for m in list(messages)[:limit])


def audit(templates: Path, catalogs: Path, documents: list[str] | None = None) -> list[Finding]:
    """Every problem of the catalogs in `catalogs` against the templates in `templates`."""
    pots, pos = _documents(templates, ".pot"), _documents(catalogs, ".po")
    names = sorted(set(pots) | set(pos)) if documents is None else documents
    findings = []
    for name in names:
        shown = f"{catalogs.name}/{name}.po" if catalogs != CATALOGS else f"{catalogs.relative_to(ROOT)}/{name}.po"
        if name not in pots and name not in pos:
            findings.append(Finding(shown, "document asked for: it has no template and no catalog", 1))
            continue
        if name not in pos:
            wanted = _entries(read_catalog(pots[name]))
            findings.append(Finding(shown, "messages without a catalog (stale: a new document)",
                                    len(wanted), _examples(wanted)))
            continue
        catalog = read_catalog(pos[name])
        entries = _entries(catalog)
        if name not in pots:
            findings.append(Finding(shown, "entries of a document that no longer exists (stale)",
                                    len(entries), _examples(entries)))
            continue
        findings += _audit_catalog(shown, catalog, entries, _entries(read_catalog(pots[name])))
    return findings


def _audit_catalog(shown: str, catalog, entries: list, wanted: list) -> list[Finding]:
    have, want = {_key(m) for m in entries}, {_key(m) for m in wanted}
    new = [m for m in wanted if _key(m) not in have]
    removed = [m for m in entries if _key(m) not in want]
    untranslated = [m for m in entries if not m.string]
    fuzzy = [m for m in entries if m.fuzzy and m.string]
    broken = [m for m in entries if m.string and not m.fuzzy
              and (markup(m.id) != markup(m.string) or "#noqa" in m.string)]
    obsolete = list(catalog.obsolete.values())
    problems = [
        ("new messages not in the catalog (stale)", new),
        ("entries whose message is gone from the English (stale)", removed),
        ("untranslated", untranslated),
        ("fuzzy", fuzzy),
        ("obsolete (#~)", obsolete),
        ("translations that change the markup (roles, math, code, links) or say #noqa", broken),
    ]
    return [Finding(shown, kind, len(messages), _examples(messages)) for kind, messages in problems if messages]


def report(findings: list[Finding], catalogs: int, messages: int) -> str:
    if not findings:
        return f"translations: {catalogs} catalogs, {messages} messages, all translated and current"
    lines = [str(finding) for finding in findings]
    lines.append(f"translations: {len({f.catalog for f in findings})} of {catalogs} catalogs need work; {FIX}")
    return "\n".join(lines)


def progress(catalogs: Path) -> list[tuple[str, int, int, int]]:
    """(document, messages, translated, fuzzy) for each catalog; translated excludes fuzzy."""
    rows = []
    for name, po in _documents(catalogs, ".po").items():
        entries = _entries(read_catalog(po))
        fuzzy = sum(1 for m in entries if m.fuzzy and m.string)
        done = sum(1 for m in entries if m.string and not m.fuzzy)
        rows.append((name, len(entries), done, fuzzy))
    return rows


# --- the update --------------------------------------------------------------------------------
def fill_untranslatable(catalog) -> int:
    """Translate the messages that have no words (only markup, numbers, symbols) by themselves.

    A fuzzy draft of such a message (sphinx-intl's guess from a similar one, say `$X$` for
    `$R$`) is replaced too: there is nothing to translate in it.
    """
    filled = 0
    for message in _entries(catalog):
        if (message.fuzzy or not message.string) and not has_words(message.id):
            message.string, filled = message.id, filled + 1
            message.flags.discard("fuzzy")
    return filled


def update(templates: Path, catalogs: Path, documents: list[str] | None = None) -> None:
    """Merge the templates into the catalogs (sphinx-intl), then tidy what sphinx-intl leaves.

    With ``documents``, only their catalogs are touched (others may be edited meanwhile).
    """
    import shutil
    import tempfile

    from sphinx_intl import basic
    from sphinx_intl.catalog import dump_po

    locale_dir = catalogs.parent.parent  # .../locales/zh_CN/LC_MESSAGES -> .../locales
    pots = _documents(templates, ".pot")
    with tempfile.TemporaryDirectory() as chosen:
        if documents is not None:  # merge these templates only
            for name in documents:
                target = Path(chosen) / pots[name].relative_to(templates)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(pots[name], target)
            templates = Path(chosen)
        basic.update(str(locale_dir), str(templates), (catalogs.parent.name,), ignore_obsolete=True, jobs=1)
    for name, po in _documents(catalogs, ".po").items():
        if documents is not None and name not in documents:
            continue
        if name not in pots:
            print(f"Delete: {po} (its document is gone)")
            po.unlink()
            continue
        catalog = read_catalog(po)
        obsolete = len(catalog.obsolete)
        filled = fill_untranslatable(catalog)
        # sphinx-intl marks a new catalog's header fuzzy; the header is not a message to
        # translate, and a fuzzy flag must only ever mean "a translation to check".
        header, catalog.fuzzy = catalog.fuzzy, False
        if obsolete or filled or header:
            dump_po(str(po), catalog, ignore_obsolete=True, width=76)
            print(f"Tidy: {po} ({obsolete} obsolete entries dropped, {filled} entries without words filled)")


# --- the command line --------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["update", "check", "stats"])
    parser.add_argument("documents", nargs="*", help="check only these, e.g. book/index")
    parser.add_argument("--templates", type=Path,
                        help="use these .pot templates instead of extracting them again")
    parser.add_argument("--catalogs", type=Path, default=CATALOGS, help=f"default {CATALOGS.relative_to(ROOT)}")
    parser.add_argument("--build", type=Path, default=ROOT / "_build", help="the build folder (default _build)")
    args = parser.parse_args(argv)
    build = args.build.resolve()
    if args.command == "stats":
        rows = progress(args.catalogs)
        for name, messages, done, fuzzy in rows:
            print(f"{name:45} {done:5} of {messages:4} translated, {fuzzy:4} fuzzy")
        total, done = sum(r[1] for r in rows), sum(r[2] for r in rows)
        print(f"{'all ' + str(len(rows)) + ' catalogs':45} {done:5} of {total:4} translated")
        return 0

    templates = args.templates
    if templates is None:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from editions import build_gettext

        # A warning stops it: a page that failed to build (say, an API page whose import
        # failed) would otherwise lose its messages, and `update` would drop their translations.
        print("Extracting the English messages (the gettext builder)...", flush=True)
        templates = build_gettext(build, warningiserror=True, nitpicky=False,
                                  keep_going=True, quiet=True)
    documents = [d.removesuffix(".po").removesuffix(".md").removesuffix(".ipynb") for d in args.documents] or None
    if args.command == "update":
        args.catalogs.mkdir(parents=True, exist_ok=True)
        update(templates, args.catalogs, documents)
    findings = audit(templates, args.catalogs, documents)
    pots = [pot for name, pot in _documents(templates, ".pot").items() if documents is None or name in documents]
    messages = sum(len(_entries(read_catalog(pot))) for pot in pots)
    print(report(findings, len(pots), messages))
    return 1 if findings and args.command == "check" else 0


if __name__ == "__main__":
    sys.exit(main())
