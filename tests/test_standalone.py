"""Each chapter runs alone, as in Colab: its first code cell installs the package from the
repository that ``_config.yml`` names, only in Colab, hidden from the book and ignored by
nbval; then it picks its device. (``make nbval`` runs every chapter in an empty folder, with
the package installed from a wheel and no network: ``tools/standalone.py``.)
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
import yaml
from chapters import NOTEBOOKS, ROOT, ids
REPOSITORY = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]
SOURCE = f'git+{REPOSITORY["url"]}@{REPOSITORY["branch"]}'
# The package from the repository, with an optional extra such as [bert].
INSTALL = re.compile(r'    %pip install -q "attention-book(\[\w+\])? @ ' + re.escape(SOURCE) + '"$')
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
    # Anything more (a chapter's own extra install) stays inside the Colab guard.
    assert all(line.startswith("    ") for line in code[3:]), f"{path.name}:\n{first.source}"


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

