"""Read the exercises and solutions of a chapter (sphinx-exercise directives in MyST).

An exercise is a fenced ``{exercise}`` directive with a ``:label:``; its solution is a
``{solution} <label>`` directive, hidden behind a toggle by ``:class: dropdown``. The Python
code blocks of a solution are executed after the chapter by ``tools/standalone.py``, so a
solution that checks itself with an assert is really checked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_OPEN = re.compile(r"^(?P<fence>`{3,}|:{3,})\{(?P<name>[\w-]+)\}\s*(?P<argument>.*?)\s*$")
_OPTION = re.compile(r"^:(?P<key>[\w-]+):\s*(?P<value>.*?)\s*$")
_CODE = re.compile(
    r"^(?P<fence>`{3,})\s*(?:\{code-block\}\s*)?(?:python3?|ipython3?|py)\s*$\n"
    r"(?P<code>.*?)^(?P=fence)\s*$",
    re.M | re.S,
)


@dataclass
class Directive:
    name: str  # "exercise" or "solution"
    argument: str  # a solution's argument is the label of its exercise
    options: dict[str, str] = field(default_factory=dict)
    body: str = ""

    @property
    def label(self) -> str:
        return self.options.get("label", "")

    @property
    def classes(self) -> list[str]:
        return self.options.get("class", "").split()

    @property
    def python(self) -> list[str]:
        """The Python code blocks in the body."""
        return [match["code"] for match in _CODE.finditer(self.body)]


def directives(markdown: str, names: tuple[str, ...] = ("exercise", "solution")) -> list[Directive]:
    """The top-level ``{exercise}`` and ``{solution}`` directives of MyST ``markdown``."""
    lines = markdown.splitlines()
    found, index = [], 0
    while index < len(lines):
        opening = _OPEN.match(lines[index])
        if opening is None or opening["name"] not in names:
            index += 1
            continue
        fence = opening["fence"]
        closing = re.compile(rf"^{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        end = index + 1
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        body = lines[index + 1 : end]
        options = {}
        while body and (option := _OPTION.match(body[0])):
            options[option["key"]] = option["value"]
            body = body[1:]
        found.append(Directive(opening["name"], opening["argument"], options, "\n".join(body) + "\n"))
        index = end + 1
    return found
