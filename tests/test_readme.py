"""The README's promises: its usage example runs, and its commands and links exist."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", README, re.M | re.S)


def test_the_usage_example_runs_and_computes_attention():
    (example,) = _blocks("python")
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


def test_the_readme_names_the_commands_and_the_places():
    for promise in ("make book", "make test", "make test-browser", "_build/html",
                    "CONTRIBUTING.md", "Colab", "pip install"):
        assert promise in README, promise
    for target in ("book", "test", "tangle", "notebooks", "nbval", "test-browser"):
        assert re.search(rf"^{re.escape(target)}:", (ROOT / "Makefile").read_text(), re.M), target
    assert (ROOT / "CONTRIBUTING.md").is_file()
    assert "make test" in (ROOT / ".ci" / "run").read_text()
