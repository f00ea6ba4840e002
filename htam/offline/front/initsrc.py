"""Copy the reference ``Model.__init__`` (and what it needs) into ``ModelNew``.

Re-running the reference's own constructor code is the one way to get the same parameters, in
the same order, from the same RNG draws (including in-place re-initializations such as
``weight.uniform_()``), whatever the task does in ``__init__``.
"""

from __future__ import annotations

import ast

from htam.offline.front.trace import NoMatch

_SKIP = {"Model", "get_inputs", "get_init_inputs", "HTAM_SMALL", "HTAM_EXTRA"}


class _Rename(ast.NodeTransformer):
    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id == "Model":
            return ast.copy_location(ast.Name("ModelNew", node.ctx), node)
        return node


def _strip_docstring(fn: ast.FunctionDef | ast.ClassDef) -> None:
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        fn.body = body[1:] or [ast.Pass()]


def _defined(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef):
        return {stmt.name}
    if isinstance(stmt, ast.Assign | ast.AnnAssign):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def _used(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def copy_init(source: str) -> tuple[str, str]:
    """(module-level preamble, indented ``__init__`` method) for the generated file."""
    tree = ast.parse(source)
    model = next((s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == "Model"), None)
    if model is None:
        raise NoMatch("the task defines no class Model")
    init = next(
        (s for s in model.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None
    )
    if init is None:
        return _imports(tree), ""
    init = _Rename().visit(init)
    _strip_docstring(init)
    attrs = [s for s in model.body if isinstance(s, ast.Assign | ast.AnnAssign)]
    helpers = _helpers(tree, _used(init).union(*(_used(a) for a in attrs)))
    preamble = "\n".join([_imports(tree), *helpers]).strip()
    # class attributes (``expansion = 1``) the constructor or the kernels may read on self
    text = "\n".join([*(ast.unparse(_Rename().visit(a)) for a in attrs), ast.unparse(init)])
    method = "\n".join("    " + line if line else line for line in text.splitlines())
    return preamble, method


def _imports(tree: ast.Module) -> str:
    return "\n".join(
        ast.unparse(s) for s in tree.body if isinstance(s, ast.Import | ast.ImportFrom)
    )


def _helpers(tree: ast.Module, wanted: set[str]) -> list[str]:
    """Module-level definitions the constructor uses, transitively, in source order."""
    stmts = [s for s in tree.body if _defined(s) and not _defined(s) & _SKIP]
    needed: set[int] = set()
    frontier = set(wanted)
    while frontier:
        name = frontier.pop()
        for i, stmt in enumerate(stmts):
            if name in _defined(stmt) and i not in needed:
                needed.add(i)
                frontier |= _used(stmt) - _defined(stmt)
    out = []
    for i in sorted(needed):
        stmt = _Rename().visit(stmts[i])
        if isinstance(stmt, ast.FunctionDef | ast.ClassDef):
            _strip_docstring(stmt)
        out.append(ast.unparse(stmt))
    return out
