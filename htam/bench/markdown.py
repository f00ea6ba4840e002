"""Markdown tables whose cells stay on one line: a line break inside a cell ends the row and
breaks the table (seen with multi-line errors), so cells are flattened and full texts live in
the files the report points to."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

CELL_CHARS = 160


@dataclass(frozen=True)
class Link:
    """A table cell that points to a file of the bench (``href`` relative to the report)."""

    text: str
    href: str

    def __str__(self) -> str:
        return self.text


def one_line(text: str, limit: int = 300) -> str:
    """A message on one line: the first line, and when that only introduces what follows
    ("the reference failed to run:"), the last line of what follows (the exception's own)."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    if not lines:
        return ""
    line = lines[0]
    if len(lines) > 1 and line.endswith(":"):
        line = f"{line} {lines[-1]}"
    return line if len(line) <= limit else line[: limit - 3] + "..."


def cell(value: object, limit: int = CELL_CHARS) -> str:
    if isinstance(value, Link):
        return f"[{cell(value.text, limit)}]({value.href})"
    text = " ".join(str(value).split())  # every run of whitespace, line breaks included
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text.replace("|", "\\|")


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines
