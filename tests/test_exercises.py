"""Every chapter ends with 2-4 exercises whose solutions hide behind a toggle, and at least one
solution checks itself with an assert. (``make nbval`` executes the solutions' code after each
chapter: ``tools/standalone.py``.)
"""

from __future__ import annotations

import ast

import pytest
from chapters import SOURCES, ids
from exercises import directives  # tools/exercises.py


@pytest.mark.parametrize("path", SOURCES, ids=ids(SOURCES))
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

