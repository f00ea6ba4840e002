"""A module a reply split over several code blocks ("first the kernel: ..., then the module:
..."): the block defining ``ModelNew`` and the earlier blocks that define what it uses.

Judged alone, such a ``ModelNew`` block is a module without its kernel: the static check rejects
it (no ``@triton.jit`` kernel, the cheat level) or it fails on a ``NameError``, and either is
learned against the strategy asked for, though the kernel was in the reply.
"""

from __future__ import annotations

import ast
import builtins

_BUILTINS = frozenset(dir(builtins))


def with_definitions(code: str, earlier: list[str]) -> str:
    """``code`` preceded by the earlier blocks (in their order) that define, at their top
    level, a name ``code`` uses and does not bind, and by those that define what they use in
    turn. ``code`` unchanged when it needs nothing of them (or does not parse: the evaluator
    names the syntax error)."""
    tree = _parse(code)
    if tree is None:
        return code
    missing = _free_names(tree)
    parsed = [(i, _parse(block)) for i, block in enumerate(earlier)]
    chosen: set[int] = set()
    changed = True
    while missing and changed:
        changed = False
        for i, block_tree in reversed(parsed):  # the nearest block first
            if i in chosen or block_tree is None:
                continue
            defined = _top_level_names(block_tree)
            if defined & missing:
                chosen.add(i)
                missing = (missing - defined) | (_free_names(block_tree) - _bound_names(tree))
                changed = True
    if not chosen:
        return code
    parts = [earlier[i].strip("\n") for i in sorted(chosen)] + [code.strip("\n")]
    return "\n\n\n".join(parts) + "\n"


def _parse(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError):
        return None


def _free_names(tree: ast.Module) -> set[str]:
    """Names read somewhere and bound nowhere in ``tree`` (scopes ignored: a name bound in
    any scope counts as bound, so a block is added only for a name nothing here defines)."""
    loaded = {
        node.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
    }
    return loaded - _bound_names(tree) - _BUILTINS


def _bound_names(tree: ast.Module) -> set[str]:
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update(_imported(node))
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return bound


def _top_level_names(tree: ast.Module) -> set[str]:
    """What a block defines for another: its top-level functions, classes, imports and
    assignments."""
    names: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(stmt.name)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names.update(_imported(stmt))
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


def _imported(node: ast.Import | ast.ImportFrom) -> set[str]:
    return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
