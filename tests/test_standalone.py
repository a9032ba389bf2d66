"""Each chapter runs alone, as in Colab: its first code cell installs the package from the
repository that ``_config.yml`` names, only in Colab, hidden from the book and ignored by
nbval; then it picks its device. (``make nbval`` runs every chapter in an empty folder, with
the package installed from a wheel and no network: ``tools/standalone.py``.)
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
import yaml
from chapters import NOTEBOOKS, ROOT, ids
REPOSITORY = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]
SOURCE = f'git+{REPOSITORY["url"]}@{REPOSITORY["branch"]}'
# The package from the repository, with an optional extra such as [bert].
INSTALL = re.compile(r'    %pip install -q "attention-book(\[\w+\])? @ ' + re.escape(SOURCE) + '"$')
# A path of the machine that executed a chapter: a home, a checkout, a virtual environment.
MACHINE_PATH = re.compile(
    r"(?<![\w.])/(?:work|home|root|tmp|Users|usr|opt|var|private|mnt|srv)/|site-packages|\b[A-Z]:\\\\"
)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
DEVICE = re.compile(
    r'^device = torch\.device\("cuda" if torch\.cuda\.is_available\(\) else "cpu"\)$', re.M
)


def _code_cells(path: Path) -> list:
    notebook = nbformat.read(path, as_version=4)
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def test_the_repository_is_named_and_on_main():
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", REPOSITORY["url"]), REPOSITORY
    assert REPOSITORY["branch"] == "main"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_first_code_cell_installs_the_package_in_colab_only(path):
    first = _code_cells(path)[0]
    tags = set(first.metadata.get("tags", []))
    assert {"remove-cell", "nbval-ignore-output"} <= tags, f"{path.name}: tags {sorted(tags)}"
    lines = [line for line in first.source.splitlines() if line.strip()]
    code = [line for line in lines if not line.lstrip().startswith("#")]
    expected = ["import sys", 'if "google.colab" in sys.modules:', INSTALL.pattern]
    assert code[:2] == expected[:2] and len(code) > 2 and INSTALL.match(code[2]), (
        f"{path.name}: the install cell must start with\n" + "\n".join(expected)
        + f"\ngot:\n{first.source}"
    )
    # Anything more (a chapter's own extra install) stays inside the Colab guard; the cell
    # ends by making an error print as one line, in the book and in Colab alike.
    assert code[-1] == "%xmode Minimal", f"{path.name}:\n{first.source}"
    assert all(line.startswith("    ") for line in code[3:-1]), f"{path.name}:\n{first.source}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_no_other_cell_installs_anything(path):
    later = [cell.source for cell in _code_cells(path)[1:]]
    assert not [s for s in later if re.search(r"^\s*[%!]\s*(pip|conda|uv)\b", s, re.M)], path.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_the_chapter_picks_its_device_at_the_top(path):
    """Runs on Colab's GPU when there is one, on CPU everywhere else, unchanged."""
    setup = "\n".join(cell.source for cell in _code_cells(path)[1:3])
    assert DEVICE.search(setup), f"{path.name}: the set-up cell must define `device`"


def test_the_pages_that_show_the_install_command_name_the_same_repository():
    for page in ("README.md", "book/api.md"):
        text = (ROOT / page).read_text()
        commands = re.findall(r'pip install "attention-book @ git\+[^"]+"', text)
        assert commands, f"{page} shows no pip install command"
        for command in commands:
            assert command == f'pip install "attention-book @ {SOURCE}"', (page, command)



def _texts(output: object) -> Iterator[str]:
    """Every string of a cell output, colours removed, images left out (base64 is no text)."""
    if isinstance(output, str):
        yield ANSI.sub("", output)
    elif isinstance(output, list):
        for item in output:
            yield from _texts(item)
    elif isinstance(output, dict):
        for key, value in output.items():
            if not key.startswith("image/"):
                yield from _texts(value)


def test_a_machine_path_is_recognised():
    assert MACHINE_PATH.search("File \x1b[32m/work/main/src/attention_book/x.py:86".replace("\x1b[32m", ""))
    assert MACHINE_PATH.search("/root/.venv/lib/python3.11/site-packages/torch/nn/functional.py")
    assert not MACHINE_PATH.search("ValueError: block_size must be an int >= 1, got 0 (1/2)")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_no_output_names_the_machine_it_ran_on(path):
    for number, cell in enumerate(_code_cells(path), start=1):
        for text in _texts(cell.get("outputs", [])):
            match = MACHINE_PATH.search(text)
            assert match is None, f"{path.name}, code cell {number}: {text[:200]!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_no_cell_raises_and_an_error_shows_as_one_line(path):
    """Colab's "Run all" stops at the first error: a chapter shows an error with expect_error,
    which prints it as one line, ``ValueError: ...``, and fails when nothing is raised."""
    shown = 0
    for cell in _code_cells(path):
        assert "raises-exception" not in cell.metadata.get("tags", []), f"{path.name}: {cell.source[:60]!r}"
        assert not [out for out in cell.get("outputs", []) if out.output_type == "error"], path.name
        if re.search(r"^\s*with expect_error\(", cell.source, re.M):
            shown += 1
            printed = ANSI.sub("", "".join(out.get("text", "") for out in cell.get("outputs", [])))
            assert re.fullmatch(r"(?:\w+Error): [^\n]+\n", printed), f"{path.name}: {printed!r}"
    if path.name.startswith(("06_", "09_")):  # the chapters that show errors on purpose
        assert shown, f"{path.name} shows no error"
