"""The README's promises: its usage example runs, and its commands and links exist."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", README, re.M | re.S)


def test_the_usage_example_runs_and_computes_attention():
    example = _blocks("python")[0]
    assert len([line for line in example.splitlines() if line.strip()]) <= 5
    namespace, printed = {}, io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(example, "README.md", "exec"), namespace)

    q, k, v = namespace["q"], namespace["k"], namespace["v"]
    output, weights = namespace["output"], namespace["weights"]
    assert tuple(output.shape) == (2, 5, 32) and tuple(weights.shape) == (2, 5, 7)
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(2, 5))
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(output, expected)
    assert printed.getvalue().startswith("(2, 5, 32) tensor(")


@pytest.mark.parametrize("page", ["README.md", "CONTRIBUTING.md"])
def test_every_make_command_the_docs_name_is_a_target(page):
    """A reader who types a `make ...` command from the docs finds that target in the Makefile."""
    named = set(re.findall(r"(?:^|`)make ([\w-]+)", (ROOT / page).read_text(), re.M))
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M))
    assert named, f"{page} names no make command"
    assert named <= targets, f"{page} names missing targets: {sorted(named - targets)}"


def test_the_linked_files_exist():
    for link in re.findall(r"\]\(([^)#:]+)\)", README):
        assert (ROOT / link).exists(), link


def test_the_offline_recipe_loads_smollm2_on_the_books_decoder(monkeypatch):
    """The README's second example, as printed: the shipped GGUF file, no model hub."""
    from attention_book import LlamaDecoder

    recipe = _blocks("python")[1]
    assert "gguf_file=gguf" in recipe and "HF_HUB_OFFLINE=1" in README
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    namespace, printed = {}, io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(recipe, "README.md", "exec"), namespace)
    assert isinstance(namespace["model"], LlamaDecoder)
    assert printed.getvalue().startswith("The capital of France is")
    assert len(printed.getvalue().split()) > 5  # and something after it
