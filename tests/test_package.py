"""attention_book as a dependency: what importing it costs, what its distributions carry, its
license, its version and its release."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
import standalone  # tools/standalone.py
import yaml

import attention_book

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
VERSION = PYPROJECT["project"]["version"]


def run_python(code: str) -> str:
    """Run ``code`` in a fresh interpreter (nothing imported yet); returns what it printed."""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return result.stdout


# --- importing it -----------------------------------------------------------------------------


def test_importing_the_package_does_not_import_matplotlib():
    printed = run_python("import sys, attention_book; print('matplotlib' in sys.modules)")
    assert printed.strip() == "False"


def test_without_matplotlib_attention_works_and_plotting_says_what_to_install():
    printed = run_python(
        "import sys\n"
        "sys.modules['matplotlib'] = None  # as if it were not installed\n"
        "import torch\n"
        "from attention_book import plot_attention, scaled_dot_product_attention\n"
        "output, _ = scaled_dot_product_attention(torch.ones(2, 3), torch.ones(4, 3), torch.ones(4, 5))\n"
        "print(tuple(output.shape))\n"
        "try:\n"
        "    plot_attention(torch.full((2, 4), 0.25))\n"
        "except ImportError as error:\n"
        "    print(type(error).__name__, error)\n"
    )
    shape, error = printed.strip().splitlines()
    assert shape == "(2, 5)"
    assert error.startswith("ImportError plot_attention needs matplotlib")
    assert "pip install 'attention-book[plot]'" in error


def test_matplotlib_is_an_extra_not_a_requirement():
    assert not any(dep.startswith("matplotlib") for dep in PYPROJECT["project"]["dependencies"])
    assert any(dep.startswith("matplotlib") for dep in PYPROJECT["project"]["optional-dependencies"]["plot"])


# --- its distributions ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def distributions(tmp_path_factory) -> list[Path]:
    """The sdist and the wheel, built as `make dist` builds them, from a copy of the project."""
    work = tmp_path_factory.mktemp("dist")
    project = standalone.copy_project(work)
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(work / "out"),
                    str(project)], check=True, capture_output=True)
    return sorted((work / "out").iterdir())


def test_the_wheel_carries_the_license_and_the_type_marker(distributions):
    (wheel,) = [path for path in distributions if path.suffix == ".whl"]
    assert wheel.name == f"attention_book-{VERSION}-py3-none-any.whl"
    names = zipfile.ZipFile(wheel).namelist()
    license_file = f"attention_book-{VERSION}.dist-info/licenses/LICENSE"
    assert license_file in names and "attention_book/py.typed" in names
    metadata = zipfile.ZipFile(wheel).read(f"attention_book-{VERSION}.dist-info/METADATA").decode()
    assert "License-Expression: MIT" in metadata and "License-File: LICENSE" in metadata


def test_the_distributions_pass_twine_check_strict(distributions):
    assert {path.suffix for path in distributions} == {".whl", ".gz"}
    result = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, distributions)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


# --- its license ------------------------------------------------------------------------------


def test_the_code_is_mit_and_the_prose_and_figures_cc_by_4():
    code_license = (ROOT / "LICENSE").read_text()
    assert code_license.startswith("MIT License\n") and "The Attention, executable authors" in code_license
    assert PYPROJECT["project"]["license"] == "MIT"
    assert PYPROJECT["project"]["license-files"] == ["LICENSE"]
    for page in ("README.md", "book/index.md"):
        text = (ROOT / page).read_text()
        assert "MIT" in text and "CC BY 4.0" in text, page
        assert "https://creativecommons.org/licenses/by/4.0/" in text, page


# --- its version and its release --------------------------------------------------------------


def test_one_version_everywhere_and_the_changelog_says_what_it_changed():
    assert attention_book.__version__ == VERSION
    changelog = (ROOT / "CHANGELOG.md").read_text()
    releases = re.findall(r"^## \[([^\]]+)\]", changelog, re.M)
    assert releases[0] == "Unreleased" or releases[0] == VERSION
    assert VERSION in releases
    assert "key_padding_mask" in changelog  # the renamed argument is announced


def test_the_readme_installs_the_release_and_names_the_development_version():
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"^pip install .+$", readme, re.M)
    assert commands[0] == "pip install attention-book"
    assert any(command.startswith('pip install "attention-book @ git+') for command in commands)


def test_the_release_workflow_builds_checks_and_publishes_with_trusted_publishing():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text())
    triggers = workflow[True]  # YAML reads the key `on` as True
    assert triggers["push"]["tags"] == ["v*"]
    jobs = workflow["jobs"]
    steps = [step for job in jobs.values() for step in job["steps"]]
    commands = "\n".join(step.get("run", "") for step in steps)
    assert "python -m build" in commands and "twine check --strict" in commands
    publishers = [name for name, job in jobs.items()
                  if any(step.get("uses", "").startswith("pypa/gh-action-pypi-publish@") for step in job["steps"])]
    assert len(publishers) == 1
    publish = jobs[publishers[0]]
    assert publish["permissions"] == {"id-token": "write"}  # trusted publishing: no token stored
    assert not any("password" in step.get("with", {}) for step in publish["steps"])
    # The tag must name the version being published.
    assert "GITHUB_REF_NAME" in commands and "pyproject.toml" in commands


# --- its types and its examples ---------------------------------------------------------------


def test_the_strictly_typed_usage_script_runs():
    """`make typecheck` checks tests/typed_usage.py with mypy --strict; here it must also run."""
    result = subprocess.run([sys.executable, str(ROOT / "tests" / "typed_usage.py")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "typed usage: every public name used"


def test_the_typed_script_uses_every_public_name():
    source = (ROOT / "tests" / "typed_usage.py").read_text()
    unused = [name for name in attention_book.__all__ if not re.search(rf"\b{name}\(", source)]
    assert not unused, unused


def test_the_examples_in_the_docstrings_run():
    import doctest

    for name in sorted(sys.modules):
        if name.startswith("attention_book.") and not name.split(".")[-1].startswith("_"):
            failed, _ = doctest.testmod(sys.modules[name], raise_on_error=False, verbose=False)
            assert failed == 0, name
    attempted = doctest.testmod(sys.modules["attention_book.efficient"]).attempted
    assert attempted >= 3  # tiled_attention's example: the pair it returns
