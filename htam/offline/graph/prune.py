"""The whole-model solution keeps only the runtime it uses: the runtime is one library of
helpers for every model (each activation's function and module, the recurrent cells), and a
model calls a few of them. A private helper named nowhere but in its own definition is dropped,
again until none is left (a helper only a dropped one called goes too). Names inside strings
(the C++ sources) count as uses, so nothing a kernel's source needs is dropped."""

from __future__ import annotations

import ast
import re


def prune(source: str) -> str:
    while True:
        dead = _dead(source)
        if not dead:
            return source
        lines = source.split("\n")
        for first, last in sorted(dead, reverse=True):
            del lines[first - 1 : last]
        source = "\n".join(lines)


def _dead(source: str) -> list[tuple[int, int]]:
    spans = []
    for node in ast.parse(source).body:
        if not isinstance(node, ast.FunctionDef | ast.ClassDef) or not node.name.startswith("_"):
            continue
        if len(re.findall(rf"\b{re.escape(node.name)}\b", source)) == 1:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            spans.append((first, node.end_lineno or node.lineno))
    return spans
