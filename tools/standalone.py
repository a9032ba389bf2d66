"""Run every chapter notebook alone, as in Colab, and compare its outputs (nbval).

Each chapter must run in an empty folder with nothing but the installed package and no
network. This script recreates that situation and runs nbval there, so that one execution
of each chapter checks both properties:

1. build a wheel of the package from ``pyproject.toml`` and ``src/`` (a copy, so the working
   tree is not touched) and install it, without dependencies, into a private folder that is
   put first on ``PYTHONPATH``: the wheel shadows the editable install of the development
   environment;
2. copy each chapter ``.ipynb`` into an empty folder, beside a probe notebook (run first)
   that asserts, inside the same kind of kernel, that ``attention_book`` is imported from the
   wheel and that no network interface but loopback exists. After a chapter's own cells, the copy gets
   one more cell per solution of its exercises, holding that solution's Python code: a
   solution that checks itself with an assert is executed, not only printed (its output is
   not compared: it has no reference);
3. run ``pytest --nbval`` there, inside a fresh network namespace (``unshare -n``) whose only
   interface is the loopback the kernels talk over.

    python tools/standalone.py [NOTEBOOK.ipynb ...]   # default: book/chapters/*.ipynb

With ``--run-all``, the notebooks (Colab notebooks, ``book/chapters/en/`` or ``zh/``) are run
as Colab's "Run all" runs them, in the same empty folder, wheel and network namespace: top to
bottom, the first error stops the run and fails it (no tag lets a cell raise), and nothing is
compared.

    python tools/standalone.py --run-all book/chapters/en/06_multihead_attention.ipynb ...
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from exercises import directives  # tools/exercises.py, beside this script

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ROOT / "book" / "chapters"
SANITIZE = ROOT / "tests" / "nbval_sanitize.cfg"
PROBE_NAME = "00_standalone_probe.ipynb"

PROBE_SOURCE = '''\
# Not a chapter: proves the conditions the chapters run under.
import os
import socket
from pathlib import Path

import attention_book

package = Path(attention_book.__file__).resolve()
wheel = Path(os.environ["ATTENTION_BOOK_WHEEL_SITE"]).resolve()
assert wheel in package.parents, f"attention_book imported from {package}, not from the wheel"
assert not any(Path.cwd().glob("*.py")), "the notebook folder must hold no Python modules"

interfaces = sorted(name for _, name in socket.if_nameindex())
assert interfaces == ["lo"], f"network interfaces {interfaces}: the chapters must run without network"

# `make nbval-generic` and `make nbval-avx2` choose PyTorch's CPU code path: it must be in effect.
import torch

wanted = os.environ.get("ATEN_CPU_CAPABILITY")
assert not wanted or torch.backends.cpu.get_cpu_capability() == wanted.upper(), (
    f"ATEN_CPU_CAPABILITY={wanted}, but torch runs {torch.backends.cpu.get_cpu_capability()}"
)
'''


def copy_project(work: Path) -> Path:
    """A copy of what the package is built from, in ``work/project`` (the tree stays untouched)."""
    project = work / "project"
    project.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, project / name)
    shutil.copytree(
        ROOT / "src" / "attention_book",
        project / "src" / "attention_book",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    return project


def build_wheel(work: Path) -> Path:
    """Build the package's wheel from a copy of its sources; returns the wheel's path."""
    project = copy_project(work)
    dist = work / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
         "--no-build-isolation", "--wheel-dir", str(dist), str(project)],
        check=True,
    )
    (wheel,) = dist.glob("attention_book-*.whl")
    return wheel


def install_wheel(wheel: Path, work: Path) -> Path:
    site = work / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
         "--target", str(site), str(wheel)],
        check=True,
    )
    return site


def write_probe(folder: Path) -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {
        "display_name": "Python 3", "language": "python", "name": "python3",
    }
    notebook.cells.append(nbformat.v4.new_code_cell(PROBE_SOURCE))
    notebook.cells[0].id = "probe"
    notebook.cells[0].execution_count = 1  # executed, no output: nbval compares the empty output
    nbformat.write(notebook, folder / PROBE_NAME)


def copy_with_solutions(notebook: Path, folder: Path) -> int:
    """Copy a chapter into ``folder``, its solutions' code appended; returns how many."""
    chapter = nbformat.read(notebook, as_version=4)
    markdown = "\n\n".join(c.source for c in chapter.cells if c.cell_type == "markdown")
    solutions = [d for d in directives(markdown, ("solution",)) if d.python]
    for number, solution in enumerate(solutions, start=1):
        cell = nbformat.v4.new_code_cell(
            f"# The solution of exercise {solution.argument}, as printed in the chapter.\n"
            + "\n".join(solution.python),
            metadata={"tags": ["nbval-ignore-output"]},
        )
        cell.id = f"solution-{number:02d}"
        chapter.cells.append(cell)
    nbformat.write(chapter, folder / notebook.name)
    return len(solutions)


# Run in the new network namespace: bring its loopback interface up (the kernels and nbval
# talk over 127.0.0.1), then become the command. No dependence on iproute2's `ip`.
_LOOPBACK_UP = """
import fcntl, os, socket, struct, sys
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    flags = struct.unpack("16sH14x", fcntl.ioctl(s, 0x8913, struct.pack("16sH14x", b"lo", 0)))[1]
    fcntl.ioctl(s, 0x8914, struct.pack("16sH14x", b"lo", flags | 0x1))  # SIOCSIFFLAGS: IFF_UP
os.execvp(sys.argv[1], sys.argv[1:])
"""


def isolated(command: list[str]) -> list[str]:
    """``command`` in a new network namespace with only the loopback interface up."""
    unshare = ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "--map-root-user", "--net"]
    return [*unshare, sys.executable, "-c", _LOOPBACK_UP, *command]


# Colab's "Run all": every cell in order; the first error stops the run. nbclient's
# force_raise_errors ignores the raises-exception tag, which Colab does not know.
_RUN_ALL = """
import sys, time
import nbformat
from nbclient import NotebookClient
for name in sys.argv[1:]:
    start = time.perf_counter()
    notebook = nbformat.read(name, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3", force_raise_errors=True,
                   resources={"metadata": {"path": "."}}).execute()
    print(f"run all: {name}: every cell ran, none raised ({time.perf_counter() - start:.1f} s)", flush=True)
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--run-all", action="store_true",
                        help="run the notebooks as Colab's Run all does; compare nothing")
    args = parser.parse_args(argv)
    notebooks = [p.resolve() for p in args.notebooks] or sorted(CHAPTERS.glob("*.ipynb"))
    if not notebooks:
        print("no chapter notebooks found", file=sys.stderr)
        return 1

    start = time.perf_counter()
    path = os.environ.get("ATEN_CPU_CAPABILITY", "the machine's own")
    print(f"standalone: PyTorch's CPU code path: {path}", flush=True)
    with tempfile.TemporaryDirectory(prefix="attention-book-standalone-") as tmp:
        work = Path(tmp)
        site = install_wheel(build_wheel(work), work)
        run = work / "notebooks"
        run.mkdir()
        write_probe(run)
        if args.run_all:  # each edition's notebook of a chapter has the chapter's name
            names = [f"{notebook.parent.name}_{notebook.name}" for notebook in notebooks]
            for notebook, name in zip(notebooks, names):
                shutil.copy2(notebook, run / name)
            solutions = 0
        else:
            solutions = sum(copy_with_solutions(notebook, run) for notebook in notebooks)
        print(f"standalone: wheel installed in {site}; running {len(notebooks)} notebooks "
              f"and {solutions} solutions in {run} without network ({time.perf_counter() - start:.1f} s to prepare)",
              flush=True)

        env = dict(os.environ)
        env.update(
            PYTHONPATH=str(site),
            ATTENTION_BOOK_WHEEL_SITE=str(site),
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            PYDEVD_DISABLE_FILE_VALIDATION="1",
        )
        command = [sys.executable, "-c", _RUN_ALL, *names] if args.run_all else [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            "--rootdir", str(run), "--nbval", "--nbval-current-env",
            "--nbval-sanitize-with", str(SANITIZE),
            PROBE_NAME, *(notebook.name for notebook in notebooks),
        ]
        result = subprocess.run(isolated(command), cwd=run, env=env)
    print(f"standalone: {time.perf_counter() - start:.1f} s in all", flush=True)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
