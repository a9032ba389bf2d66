"""`make pdf`: the book on paper, a PDF of each edition (English, and Chinese: 中文版), by XeLaTeX.

For each edition, in a process of its own (the two run side by side):

1. Sphinx's LaTeX builder writes the LaTeX into BUILD/latex/<edition>, from a clean cache, with
   the configuration that `jupyter-book build` reads (tools/editions.py: `_config.yml`, the
   `latex:` section and `sphinx.config.latex_elements` included); the Chinese edition with
   `language = zh_CN` and the catalogs of locales/, as the HTML one.
   tools/book_latex.py arranges it as a book and names its file.
2. latexmk runs XeLaTeX until the cross-references settle.
3. The LaTeX log is read: a "Missing character" (a glyph that no font of the book has), an
   undefined reference or citation, or a box that overflows the text block by more than
   MAX_OVERFULL_PT (into the margin, or off the page) fails the build, each one listed.
4. The PDF is copied into the HTML site that `make build` wrote: BUILD/html/<name> for
   English, BUILD/html/zh/<name> for Chinese (the names are PDF_NAMES of tools/book_i18n.py,
   which links both from every page).

    python tools/pdf.py              both editions
    python tools/pdf.py en           one (en or zh)
    python tools/pdf.py --build DIR  another build folder (default _build)

Options `-W`, `-n` and `--keep-going` mean what they mean to `jupyter-book build` (the Makefile
passes all three, as for the HTML).

Needs Debian's texlive-xetex, texlive-latex-extra, texlive-lang-chinese, latexmk and the fonts
of `_config.yml` (`make texlive` installs them).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

from book_i18n import PDF_NAMES  # noqa: E402
from editions import (  # noqa: E402
    EDITION_FOLDER, LANGUAGE, LOCALES, chinese_overrides, compile_catalogs, sphinx_build,
)

EDITIONS = {"en": "en", "zh": LANGUAGE}  # command-line name: Sphinx language
# In the site, each edition's PDF is at the root of the edition's folder.
SITE_FOLDERS = {"en": "", "zh": EDITION_FOLDER}
# A box this much wider (or taller) than the text block, in points, is text pushed into the margin
# or off the page: a failure. Smaller ones stay within the margins.
MAX_OVERFULL_PT = 20.0
LATEXMK = ["latexmk", "-pdfxe", "-dvi-", "-ps-", "-interaction=nonstopmode", "-halt-on-error",
           "-file-line-error"]


def latex_folder(build: Path, edition: str) -> Path:
    return build / "latex" / edition


def pdf_name(edition: str) -> str:
    return PDF_NAMES[EDITIONS[edition]]


def write_latex(build: Path, edition: str, **options) -> Path:
    """Sphinx's LaTeX of `edition` into its folder, from a clean cache; the .tex file."""
    outdir, doctrees = latex_folder(build, edition), build / f".doctrees-latex-{edition}"
    for folder in (outdir, doctrees):  # latexmk would otherwise report a stale run as up to date
        shutil.rmtree(folder, ignore_errors=True)
    overrides = {}
    if edition == "zh":
        catalogs = build / "latex" / "locale-zh"
        compile_catalogs(LOCALES, LANGUAGE, catalogs)
        overrides = chinese_overrides(catalogs)
    code = sphinx_build("latex", outdir, doctrees, overrides, quiet=True, **options)
    if code:
        raise SystemExit(f"{edition}: the LaTeX build failed (exit code {code})")
    tex = outdir / pdf_name(edition).replace(".pdf", ".tex")
    if not tex.is_file():
        raise SystemExit(f"{edition}: Sphinx wrote no {tex.name} in {outdir}")
    return tex


def problems_in_log(log: str) -> list[str]:
    """What in a XeLaTeX log makes the PDF wrong: missing glyphs, broken references, text cut."""
    problems = sorted(set(re.findall(r"^Missing character: .*$", log, re.M)))
    problems += sorted(set(re.findall(r"^(?:LaTeX|Package natbib) Warning: (?:Reference|Citation) .* undefined.*$",
                                      log, re.M)))
    for match in re.finditer(r"^Overfull \\[hv]box \((\d+(?:\.\d+)?)pt too (?:wide|high)\).*$", log, re.M):
        if float(match[1]) > MAX_OVERFULL_PT:
            problems.append(match[0])
    return problems


def page_count(log: str) -> int:
    match = re.search(r"^Output written on .*? \((\d+) pages?", log, re.M)
    return int(match[1]) if match else 0


def compile_pdf(tex: Path) -> Path:
    """latexmk with XeLaTeX in the .tex file's folder; the PDF, once its log shows no problem."""
    log_file = tex.with_suffix(".log")
    # max_print_line: one log line per message, so that none is cut where it is searched.
    environment = {**os.environ, "max_print_line": "100000"}
    run = subprocess.run([*LATEXMK, tex.name], cwd=tex.parent, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, errors="replace", env=environment)
    log = log_file.read_text(encoding="utf-8", errors="replace") if log_file.is_file() else ""
    if run.returncode:
        errors = re.findall(r"^(?:\S+:\d+: |! ).*$", log, re.M)[:20]
        raise SystemExit(f"{tex.name}: XeLaTeX failed (latexmk exit code {run.returncode}); "
                         f"see {log_file}:\n" + "\n".join(errors or run.stdout.splitlines()[-30:]))
    problems = problems_in_log(log)
    if problems:
        raise SystemExit(f"{tex.name}: {len(problems)} problems in {log_file}:\n" + "\n".join(problems))
    return tex.with_suffix(".pdf")


def build_edition(build: Path, edition: str, **options) -> None:
    """One edition's PDF, from scratch; run in a process of its own (Sphinx is not thread-safe)."""
    start = time.monotonic()
    tex = write_latex(build, edition, **options)
    latex_time = time.monotonic() - start
    pdf = compile_pdf(tex)
    pages = page_count(tex.with_suffix(".log").read_text(encoding="utf-8", errors="replace"))
    print(f"{edition}: {pdf} ({pages} pages): LaTeX in {latex_time:.0f} s, "
          f"XeLaTeX in {time.monotonic() - start - latex_time:.0f} s")


def publish(build: Path, edition: str) -> Path:
    """Copy the edition's PDF into the HTML site, where every page links it."""
    site = build / "html" / SITE_FOLDERS[edition]
    if not (site / "index.html").is_file():
        raise SystemExit(f"{site} has no built HTML edition: build the book first (`make build`)")
    target = site / pdf_name(edition)
    shutil.copyfile(latex_folder(build, edition) / pdf_name(edition), target)
    return target


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("editions", nargs="*", metavar="{en,zh}", help="the editions to build (default: both)")
    parser.add_argument("--build", type=Path, default=ROOT / "_build", help="the build folder (default _build)")
    parser.add_argument("-W", dest="warningiserror", action="store_true", help="warnings are errors")
    parser.add_argument("-n", dest="nitpicky", action="store_true", help="warn about every missing reference")
    parser.add_argument("--keep-going", action="store_true", help="report every warning before failing")
    parser.add_argument("--one", choices=EDITIONS, help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args(argv)
    build = args.build.resolve()
    flags = [flag for flag, on in (("-W", args.warningiserror), ("-n", args.nitpicky),
                                   ("--keep-going", args.keep_going)) if on]
    if args.one:
        build_edition(build, args.one, warningiserror=args.warningiserror, nitpicky=args.nitpicky,
                      keep_going=args.keep_going)
        return
    editions = args.editions or list(EDITIONS)
    if set(editions) - set(EDITIONS):
        parser.error(f"unknown editions {sorted(set(editions) - set(EDITIONS))}: choose among {list(EDITIONS)}")
    start = time.monotonic()

    def child(edition: str) -> int:
        command = [sys.executable, str(Path(__file__).resolve()), "--build", str(build), *flags, "--one", edition]
        return subprocess.run(command, cwd=ROOT).returncode

    with ThreadPoolExecutor(len(editions)) as pool:
        codes = dict(zip(editions, pool.map(child, editions)))
    failed = [edition for edition, code in codes.items() if code]
    if failed:
        raise SystemExit(f"make pdf: the PDF of {', '.join(failed)} failed (see above)")
    for edition in editions:
        print(f"{edition}: {publish(build, edition)}")
    print(f"make pdf: {len(editions)} PDFs in {time.monotonic() - start:.0f} s")


if __name__ == "__main__":
    main()
