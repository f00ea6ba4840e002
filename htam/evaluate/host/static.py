"""Static checks on a candidate's source, before anything of it runs.

Each rule has a name so that reports and the cheat fixtures can say which rule caught what.
The dynamic checks in the worker back these up; neither alone is the whole defence. Whether a
solution's forward runs its own kernels is judged on what runs (judge's kernel probe,
docs/evaluator.md), not here: the source only has to build or define one.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

# Modules whose import alone gives a candidate a way around the harness.
FORBIDDEN_MODULES = {
    "gc": "introspection",
    "inspect": "introspection",
    "ctypes": "introspection",
    "threading": "threads",
    "_thread": "threads",
    "concurrent": "threads",
    "multiprocessing": "threads",
    "asyncio": "threads",
    "subprocess": "threads",
    "signal": "threads",
    "importlib": "reference-call",
    "builtins": "introspection",
    "pickle": "introspection",
}
FORBIDDEN_NAMES = {
    "__import__": "reference-call",
    "globals": "introspection",
    "vars": "introspection",
    "eval": "introspection",
    "exec": "introspection",
    "compile": "introspection",
    "setattr": "timer-patch",
    "delattr": "timer-patch",
}
FORBIDDEN_ATTRS = {
    "_getframe": "introspection",
    "f_back": "introspection",
    "f_globals": "introspection",
    "f_locals": "introspection",
    "__globals__": "introspection",
    "__subclasses__": "introspection",
    "__torch_function__": "lazy-tensor",
    "__torch_dispatch__": "lazy-tensor",
    "_make_subclass": "lazy-tensor",
    "as_subclass": "lazy-tensor",
    "fork": "threads",
    "system": "threads",
    "popen": "threads",
    "spawnv": "threads",
    # the harness wraps the extension's functions and Triton's launch to see which ran: what
    # is inside a wrapper is no business of a solution
    "__closure__": "introspection",
    "cell_contents": "introspection",
    "__wrapped__": "introspection",
}
PATCHED_ROOTS = {"time", "torch", "triton", "os", "sys", "np", "numpy"}
# The process environment steers torch, Triton and OpenMP (compile threads, caches, kernels
# chosen): a candidate may read it (where to build), never change it.
ENVIRONMENT_WRITES = {"putenv", "unsetenv"}
MUTATORS = {"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__"}
# Except the variables that only say how torch.utils.cpp_extension builds (which nvcc, which
# architectures, how many compile jobs), which LLM solutions set before load_inline
# (``os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0a")``): the build runs in the
# candidate's own sandboxed process, and nothing of the judge's reads them.
BUILD_VARIABLES = {
    "TORCH_CUDA_ARCH_LIST",
    "CUDA_HOME",
    "CUDA_PATH",
    "PYTORCH_NVCC",
    "MAX_JOBS",
    "PATH",
}
# the mutators whose first argument names the variable
KEYED_MUTATORS = {"setdefault", "pop", "__setitem__", "__delitem__"}
# torch's own compiler writes kernels: code that calls it is torch-only code (--allow-torch).
COMPILER_ATTRS = {"_dynamo", "_inductor"}
# Except the helpers that kernels written in the style of torch's generated code (KernelLLM's)
# import: grids, device math, dynamo's C guards (assert_size_stride, empty_strided_cuda) and
# the aten calls inductor names extern kernels. None of them compiles anything.
COMPILER_HELPERS = ("torch._inductor.runtime", "torch._C._dynamo.guards")
COMPILER_HELPER_NAMES = {"torch._inductor.select_algorithm": {"extern_kernels"}}


@dataclass(frozen=True)
class Violation:
    rule: str
    line: int
    detail: str

    def __str__(self) -> str:
        where = f" line {self.line}" if self.line else ""  # 0: the file as a whole
        return f"[{self.rule}]{where}: {self.detail}"


def _root(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


class _Checker(ast.NodeVisitor):
    def __init__(self, own_model: bool = False) -> None:
        self.found: list[Violation] = []
        # the solution defines a class Model of its own (a copy of the reference it subclasses,
        # as LLMs write in level 3): the name is its own, and the reference stays out of reach
        self.own_model = own_model
        self.imported: set[str] = set()  # names bound to modules or their members by imports
        self.jit_functions: set[str] = set()
        self.load_inline_calls = 0
        # bare names that build an extension: load_inline anywhere, load only when imported
        # from torch.utils.cpp_extension (json.load or torch.load builds nothing)
        self.builders: set[str] = {"load_inline"}
        self.compiler: list[Violation] = []  # torch.compile and friends: refused unless allowed
        self.extension_modules: set[str] = set()  # names bound to torch.utils.cpp_extension
        self.allowed: set[int] = set()  # ids of nodes a narrower rule in visit_Call let through
        self.set_attrs: list[tuple[str, ast.Call]] = []  # setattr/delattr: judged after imports

    def add(self, rule: str, node: ast.AST, detail: str) -> None:
        self.found.append(Violation(rule, getattr(node, "lineno", 0), detail))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._module(alias.name, node, None)
            self.imported.add(alias.asname or alias.name.split(".")[0])
            if alias.name == "torch.utils.cpp_extension" and alias.asname:
                self.extension_modules.add(alias.asname)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self._module(node.module or "", node, {alias.name for alias in node.names})
        for alias in node.names:
            self.imported.add(alias.asname or alias.name)
            if node.module == "torch.utils.cpp_extension" and alias.name in ("load", "load_inline"):
                self.builders.add(alias.asname or alias.name)
            if node.module == "torch.utils" and alias.name == "cpp_extension":
                self.extension_modules.add(alias.asname or alias.name)
            if alias.name in FORBIDDEN_NAMES or alias.name in FORBIDDEN_ATTRS:
                rule = FORBIDDEN_NAMES.get(alias.name) or FORBIDDEN_ATTRS[alias.name]
                self.add(rule, node, f"imports {alias.name}")
        self.generic_visit(node)

    def _module(self, name: str, node: ast.AST, names: set[str] | None) -> None:
        top = name.split(".")[0]
        if top in FORBIDDEN_MODULES:
            self.add(FORBIDDEN_MODULES[top], node, f"imports {name}")
        helper = _helper(name) or bool(names and names <= COMPILER_HELPER_NAMES.get(name, set()))
        if set(name.split(".")) & COMPILER_ATTRS and not helper:
            self._compiler(node, f"imports {name}")

    def _compiler(self, node: ast.AST, what: str) -> None:
        self.compiler.append(
            Violation("torch-compiler", getattr(node, "lineno", 0),
                      f"{what}: torch's compiler writes those kernels, not the solution")
        )  # fmt: skip

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "Model" and not self.own_model:
            self.add("reference-call", node, "uses the reference class Model")
        elif node.id in FORBIDDEN_NAMES and id(node) not in self.allowed:
            self.add(FORBIDDEN_NAMES[node.id], node, f"uses {node.id}()")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in FORBIDDEN_ATTRS:
            self.add(FORBIDDEN_ATTRS[node.attr], node, f"uses .{node.attr}")
        if node.attr == "Model":
            self.add("reference-call", node, "uses the reference class Model")
        if node.attr == "modules" and _root(node) == "sys":
            self.add("reference-call", node, "uses sys.modules")
        if node.attr in ENVIRONMENT_WRITES or (
            node.attr in MUTATORS
            and ast.unparse(node.value).endswith("environ")
            and id(node) not in self.allowed
        ):
            self.add("environment", node, f"changes the process environment ({ast.unparse(node)})")
        text = ast.unparse(node)
        if _helper(text):  # torch._C._dynamo.guards.assert_size_stride: the chain is a helper
            inner: ast.AST = node
            while isinstance(inner, ast.Attribute):
                self.allowed.add(id(inner))
                inner = inner.value
        if (node.attr in COMPILER_ATTRS and id(node) not in self.allowed) or (
            node.attr == "compile" and _root(node) == "torch"
        ):
            self._compiler(node, f"uses {text}")
        if (
            isinstance(node.ctx, (ast.Store, ast.Del))
            and (_root(node) in PATCHED_ROOTS or _root(node) in self.imported)
            and not text.startswith("torch.backends.")  # allow_tf32 and friends are settings
        ):
            self.add("timer-patch", node, f"assigns to {text}")
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)) and _root(node) in PATCHED_ROOTS:
            environ = ast.unparse(node.value).endswith("environ")
            if not (environ and _build_variable(node.slice)):
                self.add("environment" if environ else "timer-patch", node,
                         f"assigns to {ast.unparse(node)}")  # fmt: skip
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            text = ast.unparse(base)
            if text.endswith("Tensor"):
                self.add("lazy-tensor", node, f"subclasses {text}")
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        for dec in node.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            if ast.unparse(target).split(".")[-1] in ("jit", "autotune", "heuristics"):
                self.jit_functions.add(node.name)
        self.generic_visit(node)

    def builds(self, func: ast.AST) -> bool:
        """Whether calling ``func`` builds a C++/CUDA extension."""
        text = ast.unparse(func)
        if text in self.builders or text.endswith((".load_inline", "cpp_extension.load")):
            return True
        # import torch.utils.cpp_extension as ce; ce.load(...)
        return (
            isinstance(func, ast.Attribute)
            and func.attr == "load"
            and (ast.unparse(func.value) in self.extension_modules)
        )

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr in KEYED_MUTATORS
            and ast.unparse(func.value).endswith("environ")
            and node.args
            and _build_variable(node.args[0])
        ):
            self.allowed.add(id(func))
        if isinstance(func, ast.Name) and func.id in ("setattr", "delattr"):
            self.allowed.add(id(func))
            self.set_attrs.append((func.id, node))
        if self.builds(func):
            self.load_inline_calls += 1
        if ast.unparse(func) in ("triton.jit", "jit") and node.args:
            self.jit_functions.add(ast.unparse(node.args[0]))  # kernel = triton.jit(fn)
        self.generic_visit(node)

    def judge_set_attrs(self) -> None:
        """``setattr(obj, name, v)`` is ``obj.<name> = v``: refused where that assignment is (an
        imported or patched root, or an object the source computes), allowed on the solution's
        own objects (``setattr(self, f"conv{i}", ...)``)."""
        for name, call in self.set_attrs:
            target = call.args[0] if call.args else None
            root = _root(target) if target is not None else None
            if root is None or root in PATCHED_ROOTS or root in self.imported:
                self.add(FORBIDDEN_NAMES[name], call, f"uses {name}()")


def _helper(dotted: str) -> bool:
    return any(dotted == p or dotted.startswith(p + ".") for p in COMPILER_HELPERS)


def _build_variable(key: ast.AST) -> bool:
    return isinstance(key, ast.Constant) and key.value in BUILD_VARIABLES


TOO_DEEP = Violation(
    "nesting",
    0,
    "expressions or statements nested deeper than the static rules can check (a sum of "
    "hundreds of terms written out is one): write it as a loop, sum() or a table",
)


def check_source(code: str, language: str, allow_torch: bool = False) -> list[Violation]:
    """All rule violations in ``code``; empty means the source may run."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return [Violation("syntax", exc.lineno or 0, f"syntax error: {exc.msg}")]
    except RecursionError:  # deeper still: the parser itself gave up
        return [TOO_DEEP]
    own_model = any(isinstance(n, ast.ClassDef) and n.name == "Model" for n in tree.body)
    checker = _Checker(own_model)
    try:
        checker.visit(tree)
    except RecursionError:
        # A tree the rules cannot walk is a tree they cannot vouch for. Python itself runs a
        # sum of 700 terms (its compiler recurses in C); raised from here, the error ended
        # the evaluation and the whole optimization run.
        return [TOO_DEEP]
    checker.judge_set_attrs()
    found = checker.found
    has_model_new = any(
        isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in ast.walk(tree)
    )
    if not has_model_new:
        found.append(Violation("no-model-new", 0, "the solution defines no class ModelNew"))
    if not allow_torch:
        found.extend(checker.compiler)
        found.extend(_kernel_rule(checker, language))
    return found


def _kernel_rule(checker: _Checker, language: str) -> list[Violation]:
    if language == "triton":
        if checker.jit_functions:
            return []
        detail = "no @triton.jit kernel is defined"
        if checker.load_inline_calls:  # a C++ solution labelled triton was told --allow-torch
            detail += "; it builds a C++/CUDA extension: give the language as cpp or cuda"
    else:
        if checker.load_inline_calls:
            return []
        detail = (
            f"no {language} kernel is built with torch.utils.cpp_extension (load_inline or load)"
        )
        if checker.jit_functions:  # the hint that helps: the language was mislabelled
            detail += "; it launches a @triton.jit kernel: give the language as triton"
    return [Violation("no-kernel", 0, detail + "; pass --allow-torch to time torch-only code")]
