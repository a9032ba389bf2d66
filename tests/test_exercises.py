"""Every chapter ends with 2-4 exercises whose solutions hide behind a toggle, and at least one
solution checks itself with an assert. (``make nbval`` executes the solutions' code after each
chapter: ``tools/standalone.py``.)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from exercises import directives  # noqa: E402 (tools/exercises.py)

CHAPTERS = sorted((ROOT / "book" / "chapters").glob("*.md"))


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_exercises_and_solutions(path):
    found = directives(path.read_text())
    exercises = [d for d in found if d.name == "exercise"]
    solutions = [d for d in found if d.name == "solution"]
    assert 2 <= len(exercises) <= 4, f"{path.name}: {len(exercises)} exercises, expected 2-4"

    labels = [exercise.label for exercise in exercises]
    assert all(labels) and len(set(labels)) == len(labels), f"{path.name}: labels {labels}"
    answered = [solution.argument for solution in solutions]
    assert sorted(answered) == sorted(labels), (
        f"{path.name}: each exercise needs exactly one solution; exercises {labels}, "
        f"solutions {answered}"
    )
    for solution in solutions:
        assert "dropdown" in solution.classes, (
            f"{path.name}: the solution of {solution.argument} is not hidden (:class: dropdown)"
        )
        for code in solution.python:
            ast.parse(code)  # a solution's code is valid Python

    def checks_itself(code: str) -> bool:
        return any(
            isinstance(node, ast.Assert)
            or (isinstance(node, ast.Call) and "assert" in ast.unparse(node.func))
            for node in ast.walk(ast.parse(code))
        )

    assert any(checks_itself(code) for s in solutions for code in s.python), (
        f"{path.name}: no solution checks itself with an assert"
    )


def test_the_reader_recognises_fences_options_and_code():
    text = """
```{exercise}
:label: ex-a

Question $x$.
```

````{solution} ex-a
:class: dropdown

Because.

```python
x = 1
assert x == 1
```
````

:::{exercise}
:label: ex-b
Another.
:::
"""
    exercise_a, solution_a, exercise_b = directives(text)
    assert (exercise_a.name, exercise_a.label, exercise_b.label) == ("exercise", "ex-a", "ex-b")
    assert (solution_a.argument, solution_a.classes) == ("ex-a", ["dropdown"])
    assert solution_a.python == ["x = 1\nassert x == 1\n"]
    assert exercise_a.python == []
