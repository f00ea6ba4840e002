"""Builds of a candidate's ``load_inline`` extensions ahead of its timed evaluation, without
running any of its code: the calls' arguments are read from the source when they are plain
values (string constants, names bound to them, lists, ``+``, f-strings of such), and a build job
(a sandboxed process like the candidate's, its code written here) compiles them. The outputs are
cached by the same key the candidate's own ``load_inline`` uses (compile_cache.extension_key),
so the timed evaluation loads them instead of building. A call whose arguments are computed, or
whose flags could run code (``-fplugin``, include paths), is not prebuilt: the candidate builds it
in its own process, as without prebuilds.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re

from htam.evaluate.host.compile_cache import extension_key

_FLAG = re.compile(
    r"-O[0-3s]|-std=(c|gnu)\+\+\d\d|--?use_fast_math|-lineinfo|-g|-w|-Wall|-Wno-[\w-]+"
    r"|-D\w+(=[\w.]+)?|-U\w+|--expt-relaxed-constexpr|--expt-extended-lambda|--extended-lambda"
    r"|-Xptxas(=[-\w,=]+)?|--ptxas-options=[-\w,=]+|-v|--maxrregcount=\d+|-maxrregcount=\d+"
    r"|-fopenmp|-ffast-math|-funroll-loops|-march=native|-mavx2|-mfma|-fPIC|-Xcompiler"
    r"|--compiler-options|-restrict|-arch=sm_\d+a?|-gencode=arch=compute_\d+a?,code=sm_\d+a?"
    r"|--ftz=(true|false)|--prec-div=(true|false)|--prec-sqrt=(true|false)|--fmad=(true|false)"
)
_LIB = re.compile(r"-l(cublas|cublasLt|cudnn|curand|cusparse|cufft|cuda|cudart|gomp|m)|-fopenmp")
_LISTS = {
    "extra_cflags": _FLAG,
    "extra_cuda_cflags": _FLAG,
    "extra_ldflags": _LIB,
}
# Arguments that only change where or how verbosely it builds, or what is built.
_PLAIN = {
    "name",
    "cpp_sources",
    "cuda_sources",
    "functions",
    "verbose",
    "with_cuda",
    "with_pytorch_error_handling",
    "keep_intermediates",
    "use_pch",
    "no_implicit_headers",
    "build_directory",
}


class _Computed(Exception):
    """A value the source computes: not read without running it."""


def _constants(tree: ast.Module) -> dict[str, object]:
    """Module-level names bound once to a plain value."""
    seen: dict[str, object] = {}
    twice: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if not isinstance(target, ast.Name):
            continue
        if target.id in seen:
            twice.add(target.id)
        try:
            seen[target.id] = _value(value, seen)
        except _Computed:
            twice.add(target.id)
    return {k: v for k, v in seen.items() if k not in twice}


def _value(node: ast.AST, names: dict[str, object]) -> object:
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bool, int, type(None))):
        return node.value
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    if isinstance(node, ast.List):
        return [_value(e, names) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_value(e, names) for e in node.elts)
    if isinstance(node, ast.Dict):
        keys = [k for k in node.keys if k is not None]
        if len(keys) == len(node.keys):  # no ``**other`` among them
            return {
                _value(k, names): _value(v, names) for k, v in zip(keys, node.values, strict=True)
            }
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _value(node.left, names), _value(node.right, names)
        if isinstance(left, str) and isinstance(right, str):
            return left + right
        if type(left) is list and type(right) is list:
            return left + right
    if isinstance(node, ast.JoinedStr):
        return "".join(_joined(part, names) for part in node.values)
    raise _Computed


def _joined(part: ast.AST, names: dict[str, object]) -> str:
    if isinstance(part, ast.Constant):
        return str(part.value)
    if isinstance(part, ast.FormattedValue) and part.conversion == -1 and part.format_spec is None:
        value = _value(part.value, names)
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            return str(value)
    raise _Computed


def _is_load_inline(func: ast.AST) -> bool:
    return (isinstance(func, ast.Name) and func.id == "load_inline") or (
        isinstance(func, ast.Attribute) and func.attr == "load_inline"
    )


@functools.cache
def _signature() -> inspect.Signature:
    from torch.utils import cpp_extension

    return inspect.signature(cpp_extension.load_inline)


def _safe(arguments: dict) -> bool:
    for key, value in arguments.items():
        if key in _LISTS:
            items = [value] if isinstance(value, str) else value
            if not isinstance(items, (list, tuple)) or not all(
                isinstance(v, str) and _LISTS[key].fullmatch(v) for v in items
            ):
                return False
        elif key not in _PLAIN:
            return False
    return isinstance(arguments.get("name"), str) and bool(arguments.get("name"))


def calls(code: str) -> list[dict]:
    """The bound arguments of each ``load_inline`` call in ``code`` that can be prebuilt."""
    try:
        tree = ast.parse(code)
        return _calls(tree)
    except (SyntaxError, ValueError, RecursionError):
        # (too deep a tree: the static rules refuse it; nothing is built ahead)
        return []


def _calls(tree: ast.Module) -> list[dict]:
    names = _constants(tree)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _is_load_inline(node.func)):
            continue
        if any(isinstance(a, ast.Starred) for a in node.args) or any(
            k.arg is None for k in node.keywords
        ):
            continue
        try:
            args = [_value(a, names) for a in node.args]
            kwargs = {k.arg: _value(k.value, names) for k in node.keywords if k.arg is not None}
            bound = _signature().bind(*args, **kwargs)
        except (_Computed, TypeError):
            continue
        arguments = dict(bound.arguments)
        if _safe(arguments) and arguments not in found:
            found.append(arguments)
    return found


def key(arguments: dict) -> str:
    """The name the candidate's load_inline gives this build (its folder's name)."""
    return f"{arguments['name']}_{extension_key(arguments)}"


def script(arguments: dict) -> str:
    """The code of a build job: one load_inline call with exactly these arguments (values of
    plain types, written as literals), and an empty ModelNew so that the build stage is met."""
    return (
        "from torch.utils.cpp_extension import load_inline\n\n"
        f"load_inline(**{arguments!r})\n\n\n"
        "class ModelNew:\n    pass\n"
    )
