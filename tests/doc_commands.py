"""The commands the README and docs/*.md show in their code blocks, as written.

``doc_commands()`` reads every fenced block of ``README.md`` and ``docs/*.md`` and
yields each line that runs flowpilot — ``./flowpilot …``, ``python manage.py …``,
``.venv/bin/python manage.py …``, ``manage.py …`` — also when it is shown as a comment
of an example file (``#   python manage.py validateflow …``) or after a ``$`` prompt;
a line ending in ``\\`` is joined with the next. In a transcript, a ``CommandError: …``
line after a command is the refusal it is shown to draw. ``tests/test_doc_commands.py`` runs
them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))
_FENCE = re.compile(r"^```[\w-]*\n(.*?)^```", re.S | re.M)
_COMMAND = re.compile(
    r"^(?:\$\s+|#\s+)?((?:\./flowpilot|(?:\.venv/bin/)?python (?:\S*/)?manage\.py|manage\.py)\b.*)$"
)


@dataclass(frozen=True)
class DocCommand:
    document: str  # relative to the repository: README.md, docs/steps.md
    block: int  # the line of its code block's opening fence: one block, one session
    line: int
    text: str  # the command as written, continuations joined
    # A transcript shows the refusal on the next line (``CommandError: …``): expected.
    refusal: str = ""

    def __str__(self) -> str:
        return f"{self.document}:{self.line}: {self.text}"


def doc_commands() -> Iterator[DocCommand]:
    for path in DOCUMENTS:
        text = path.read_text(encoding="utf-8")
        for fence in _FENCE.finditer(text):
            first = text.count("\n", 0, fence.start(1)) + 1
            yield from _commands(path.relative_to(REPO).as_posix(), first, fence.group(1))


def _commands(document: str, first: int, block: str) -> Iterator[DocCommand]:
    """The commands of one block; ``first`` is the line of its first content line."""
    lines = block.splitlines()
    index = 0
    while index < len(lines):
        found = _COMMAND.match(lines[index].strip())
        start = index
        index += 1
        if found is None:
            continue
        text = found.group(1)
        while text.endswith("\\") and index < len(lines):
            text = text[:-1].rstrip() + " " + lines[index].strip().lstrip("#").strip()
            index += 1
        shown = lines[index].strip() if index < len(lines) else ""
        refusal = shown if shown.startswith("CommandError:") else ""
        yield DocCommand(document, first - 1, first + start, text, refusal)
