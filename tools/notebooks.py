"""Regenerate and check the executed ``.ipynb`` paired with each chapter ``.md``.

The ``.md`` (jupytext ``md:myst``) is the source of truth. ``make notebooks`` converts each
one to a notebook, executes it in an empty temporary folder (as in Colab: only the installed
package is there) and writes it beside the ``.md``.

    python tools/notebooks.py [CHAPTER.md ...]          # execute and write
    python tools/notebooks.py --check [CHAPTER.md ...]  # exit 1 when a pair has drifted
    python tools/notebooks.py --carry CHAPTER.md ...    # prose and tags only, no execution

``--carry`` is for a change that no output can depend on: markdown cells edited, added or
removed, and code cells' metadata (tags that fold, figure captions). It refuses when a code cell's source changed, or code
cells were added, removed or reordered: then the chapter must be executed again.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ROOT / "book" / "chapters"
TIMEOUT_S = 600


def _inputs(notebook) -> list[tuple]:
    return [
        (cell.cell_type, cell.source.strip(), tuple(cell.metadata.get("tags", ())))
        for cell in notebook.cells
    ]


def drift(md: Path) -> list[str]:
    """What is wrong with the ``.ipynb`` paired with ``md`` (empty when all is well)."""
    ipynb = md.with_suffix(".ipynb")
    name = md.relative_to(ROOT).as_posix() if md.is_relative_to(ROOT) else md.name
    if not ipynb.exists():
        return [f"{name}: no paired notebook {ipynb.name}"]
    source = jupytext.read(md, fmt="md:myst")
    paired = nbformat.read(ipynb, as_version=4)
    problems = []
    expected, actual = _inputs(source), _inputs(paired)
    if expected != actual:
        for index, (want, have) in enumerate(zip(expected, actual), start=1):
            if want != have:
                problems.append(f"{name}: cell {index} of {ipynb.name} differs from the .md")
                break
        else:
            problems.append(f"{name}: {ipynb.name} has {len(actual)} cells, the .md {len(expected)}")
    counts = [
        cell.get("execution_count")
        for cell in paired.cells
        if cell.cell_type == "code" and cell.source.strip()
    ]
    if any(count is None for count in counts):
        problems.append(f"{name}: {ipynb.name} has code cells that were never executed")
    elif counts != list(range(1, len(counts) + 1)):
        problems.append(f"{name}: {ipynb.name} was not executed top to bottom in one run")
    return problems


def _coalesce_streams(cell) -> None:
    """Merge consecutive stdout (or stderr) outputs: how the kernel chunked them is timing."""
    merged = []
    for output in cell.get("outputs", []):
        previous = merged[-1] if merged else None
        if (output.output_type == "stream" and previous is not None
                and previous.output_type == "stream" and previous.name == output.name):
            previous.text += output.text
        else:
            merged.append(output)
    cell.outputs = merged


def execute(md: Path) -> float:
    """Execute one chapter in an empty folder and write its notebook; returns seconds."""
    notebook = jupytext.read(md, fmt="md:myst")
    notebook.metadata.pop("jupytext", None)
    for index, cell in enumerate(notebook.cells):
        cell.id = f"cell-{index:03d}"  # stable ids: regenerating changes only what changed
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as empty:
        client = NotebookClient(
            notebook, timeout=TIMEOUT_S, kernel_name="python3", record_timing=False,
            resources={"metadata": {"path": empty}},
        )
        client.execute()
    seconds = time.perf_counter() - start
    for cell in notebook.cells:
        if cell.cell_type == "code":
            _coalesce_streams(cell)
    nbformat.write(notebook, md.with_suffix(".ipynb"))
    return seconds


def carry(md: Path) -> None:
    """Write ``md``'s markdown cells and code cells' metadata into its executed notebook, keeping
    every code cell's source and outputs; raises ValueError when the code itself changed."""
    ipynb = md.with_suffix(".ipynb")
    source = jupytext.read(md, fmt="md:myst")
    paired = nbformat.read(ipynb, as_version=4)
    executed = [cell for cell in paired.cells if cell.cell_type == "code"]
    wanted = [cell for cell in source.cells if cell.cell_type == "code"]
    if [c.source.strip() for c in executed] != [c.source.strip() for c in wanted]:
        raise ValueError(f"{md.name}: its code changed; execute it (`make notebooks`)")
    for cell, want in zip(executed, wanted):  # tags, captions: what the .md says of the cell
        cell.metadata = want.metadata
    code, cells = iter(executed), []
    for index, cell in enumerate(source.cells):
        cell = next(code) if cell.cell_type == "code" else cell
        cell.metadata.pop("jupytext", None)
        cell.id = f"cell-{index:03d}"
        cells.append(cell)
    paired.cells = cells
    nbformat.write(paired, ipynb)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", type=Path)
    parser.add_argument("--check", action="store_true", help="check the pairs, write nothing")
    parser.add_argument("--carry", action="store_true",
                        help="carry prose and tags into the notebooks, without executing")
    args = parser.parse_args(argv)
    chapters = [p.resolve() for p in args.chapters] or sorted(CHAPTERS.glob("*.md"))
    if args.check:
        problems = [problem for md in chapters for problem in drift(md)]
        for problem in problems:
            print(problem)
        if problems:
            print("The notebooks differ from their chapters: run `make notebooks`.")
            return 1
        print(f"{len(chapters)} notebooks match their chapters and are executed.")
        return 0
    if args.carry:
        for md in chapters:
            carry(md)
            print(f"{md.relative_to(ROOT)}: prose and tags carried, outputs kept")
        return 0
    for md in chapters:
        print(f"{md.relative_to(ROOT)}: executed in {execute(md):.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
