"""Build what `jupyter-book build` cannot: the Chinese edition and the gettext templates.

The English edition is `jupyter-book build .` (the Makefile's `build`). Jupyter Book's command
line cannot set a Sphinx value such as `language`, so this script calls the function that the
command line calls (`jupyter_book.sphinx.build_sphinx`) with the same configuration, read from
`_config.yml` and `_toc.yml`, and with these values on top:

    python tools/editions.py zh        the Chinese edition: `language = zh_CN`, the catalogs
                                       of locales/ compiled into BUILD/locale; then moved into
                                       BUILD/html/zh: each page has the same path in both
    python tools/editions.py gettext   the message templates, one .pot per document, into
                                       BUILD/gettext

Both start from a clean cache (their own doctrees), so nothing stale survives a run.

BUILD is `_build` (`--build DIR` for a private build). Options `-W`, `-n` and `--keep-going`
mean what they mean to `jupyter-book build`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCALES = ROOT / "locales"
LANGUAGE = "zh_CN"
EDITION_FOLDER = "zh"  # the Chinese edition inside the English one: BUILD/html/zh


def compile_catalogs(locales: Path, language: str, target: Path) -> int:
    """Compile every `<locales>/<language>/LC_MESSAGES/**.po` into the same path under `target`.

    Returns the number of catalogs. `target` is emptied first, so that a catalog deleted from
    `locales` cannot survive as a stale `.mo`.
    """
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    source = locales / language / "LC_MESSAGES"
    destination = target / language / "LC_MESSAGES"
    shutil.rmtree(target, ignore_errors=True)
    count = 0
    for po in sorted(source.rglob("*.po")):
        mo = destination / po.relative_to(source).with_suffix(".mo")
        mo.parent.mkdir(parents=True, exist_ok=True)
        with po.open("rb") as file:
            catalog = read_po(file, locale=language)
        with mo.open("wb") as file:
            write_mo(file, catalog)  # fuzzy entries are left out, as msgfmt does
        count += 1
    return count


def sphinx_build(builder: str, outdir: Path, doctrees: Path, overrides: dict, *,
                 warningiserror: bool, nitpicky: bool, keep_going: bool, quiet: bool) -> int:
    """`jupyter-book build .` with `overrides` added to the Sphinx configuration; the exit code."""
    from jupyter_book.sphinx import build_sphinx

    overrides = {"external_toc_path": (ROOT / "_toc.yml").as_posix(), "latex_individualpages": False,
                 **({"nitpicky": True} if nitpicky else {}), **overrides}
    here = Path.cwd()
    os.chdir(ROOT)  # _config.yml names its paths relative to the repository root
    try:
        result = build_sphinx(ROOT, outdir, noconfig=True, path_config=ROOT / "_config.yml",
                              confoverrides=overrides, builder=builder, doctreedir=doctrees,
                              warningiserror=warningiserror, keep_going=keep_going, quiet=quiet)
    finally:
        os.chdir(here)
    if isinstance(result, BaseException):
        return 2
    return int(result or 0)


def build_gettext(build: Path, **options) -> Path:
    """The .pot templates of every document into `build`/gettext; returns that folder."""
    import yaml

    outdir, doctrees = build / "gettext", build / ".doctrees-gettext"
    for folder in (outdir, doctrees):  # from a clean cache: nothing stale can be extracted
        shutil.rmtree(folder, ignore_errors=True)
    title = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["title"]
    # `project` only names the book in the catalogs' headers.
    code = sphinx_build("gettext", outdir, doctrees, {"project": title}, **options)
    if code:
        sys.exit(f"the gettext build failed (exit code {code})")
    return outdir


def chinese_overrides(catalogs: Path) -> dict:
    """The Sphinx settings of the Chinese edition, its catalogs compiled into `catalogs`."""
    # An equation is referred to as 式 (41), as Chinese texts write it, not as a bare (41).
    return {"language": LANGUAGE, "locale_dirs": [str(catalogs)], "gettext_auto_build": False,
            "math_eqref_format": "式 ({number})"}


def build_chinese(build: Path, **options) -> Path:
    """The Chinese edition into `build`/html/zh; returns that folder."""
    catalogs = build / "locale"
    count = compile_catalogs(LOCALES, LANGUAGE, catalogs)
    print(f"{count} catalogs of {LOCALES.relative_to(ROOT)} compiled into {catalogs}")
    # myst-nb writes beside the output folder (its parent's jupyter_execute/), so the edition is
    # built in a folder of its own and moved into the English one afterwards.
    staging, doctrees = build / EDITION_FOLDER / "html", build / ".doctrees-zh"
    for folder in (staging, doctrees):  # from a clean cache: every page sees the new catalogs
        shutil.rmtree(folder, ignore_errors=True)
    overrides = chinese_overrides(catalogs)
    code = sphinx_build("html", staging, doctrees, overrides, **options)
    if code:
        sys.exit(f"the Chinese build failed (exit code {code})")
    target = build / "html" / EDITION_FOLDER
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(staging, target)
    print(f"The Chinese edition is in {target}")
    return target


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["zh", "gettext"])
    parser.add_argument("--build", type=Path, default=ROOT / "_build", help="the build folder (default _build)")
    parser.add_argument("-W", dest="warningiserror", action="store_true", help="warnings are errors")
    parser.add_argument("-n", dest="nitpicky", action="store_true", help="warn about every missing reference")
    parser.add_argument("--keep-going", action="store_true", help="report every warning before failing")
    parser.add_argument("--quiet", action="store_true", help="print warnings only")
    args = parser.parse_args(argv)
    options = dict(warningiserror=args.warningiserror, nitpicky=args.nitpicky,
                   keep_going=args.keep_going, quiet=args.quiet)
    build = args.build.resolve()
    (build_chinese if args.what == "zh" else build_gettext)(build, **options)


if __name__ == "__main__":
    main()
