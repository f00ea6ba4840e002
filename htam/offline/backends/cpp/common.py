"""Rendering SSA programs into C++ statements (float math, OpenMP loops).

The generated function is named ``HTAM_FN``; :func:`cpp_names` replaces it with a name derived
from the hash of the source and adds its Python binding. Sizes are arguments, so one build
serves every shape. Tensors arrive as data pointers (``t.data_ptr()`` on the Python
side) and scratch buffers are plain arrays: the code includes ``Python.h``, never
``torch/extension.h``, whose parsing made each build take a minute or more on a small CPU.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from htam.offline.ir.expr import Math, emit, literal
from htam.offline.ir.model import ACC, Arg, Operand, Program

# Below this many elements (or multiply-adds) a parallel region costs more than it saves: waking
# threads on a busy machine can take a scheduler time slice (milliseconds).
HEADER = (
    "#ifndef PY_SSIZE_T_CLEAN\n#define PY_SSIZE_T_CLEAN\n#endif\n#include <Python.h>\n"
    "#include <algorithm>\n#include <cmath>\n#include <cstdint>\n#include <memory>\n"
    "#include <vector>\n"
    "#ifndef PARALLEL_MIN\n#define PARALLEL_MIN 65536\n#endif\n"
)
REDUCTION_NAMES = ("rsum", "rmax", "rmin", "rargmax", "rargmin")


def operand_index(op: Operand, flat: str) -> str:
    n = op.name
    if op.pattern == "full":
        return flat
    if op.pattern == "trail":
        return f"{flat} % {n}_numel"
    if op.pattern == "lead":
        return f"{flat} / {n}_inner"
    return f"({flat} / {n}_inner) % {n}_numel"


def operand_params(ops: list[Operand]) -> tuple[list[str], list[str]]:
    """(pointer parameters, size parameters) of the C++ function for the operands."""
    tensors = [f"const float* __restrict__ {op.name}_p" for op in ops]
    sizes = []
    for op in ops:
        if op.pattern in ("trail", "mid"):
            sizes.append(f"int64_t {op.name}_numel")
        if op.pattern in ("lead", "mid"):
            sizes.append(f"int64_t {op.name}_inner")
    return tensors, sizes


def operand_args(ops: list[Operand], out_var: str) -> tuple[list[str], list[str]]:
    """Python call arguments matching :func:`operand_params`."""
    tensors = [f"t_{op.name}.data_ptr()" for op in ops]
    sizes = []
    for op in ops:
        if op.pattern in ("trail", "mid"):
            sizes.append(f"t_{op.name}.numel()")
        if op.pattern in ("lead", "mid"):
            sizes.append(f"_inner({out_var}.shape, {op.tail})")
    return tensors, sizes


def pointers(ops: list[Operand]) -> list[str]:
    """Statements reading the scalar operands (the others are read through ``<name>_p``)."""
    return [f"const float s_{op.name} = {op.name}_p[0];" for op in ops if op.pattern == "scalar"]


def scratch(name: str, count: str) -> list[str]:
    """A float buffer of ``count`` elements for the function's lifetime, left uninitialized:
    ``<name>_p`` points to it."""
    return [
        f"std::unique_ptr<float[]> {name}(new float[{count}]);",
        f"float* __restrict__ {name}_p = {name}.get();",
    ]


class CppProgram:
    """Emits the ops of ``prog`` as C++ statements; per-row values are arrays indexed by ``t``."""

    def __init__(self, prog: Program, operands: list[Operand], m: Math, acc: str = "acc"):
        self.prog = prog
        self.operands = {op.name: op for op in operands}
        self.m = m
        self.acc = acc
        self.scalar: set[int] = set()
        for i, op in enumerate(prog.ops):
            if (
                op.kind == "row"
                and op.name not in REDUCTION_NAMES
                and all(self.is_scalar(a) for a in op.args)
            ):
                self.scalar.add(i)

    def is_scalar(self, a: Arg) -> bool:
        if isinstance(a, float):
            return True
        if isinstance(a, str):
            return a != ACC and self.operands[a].pattern == "scalar"
        return a in self.scalar

    def ref(self, a: Arg) -> str:
        if isinstance(a, float):
            return literal(a, "cpp")
        if isinstance(a, str):
            if a == ACC:
                return self.acc
            return f"s_{a}" if self.operands[a].pattern == "scalar" else f"in_{a}"
        if self.prog.ops[a].kind == "elem":
            return f"v{a}"
        return f"r{a}" if a in self.scalar else f"r{a}[t]"

    def expr(self, i: int) -> str:
        op = self.prog.ops[i]
        if op.name == "rsize":
            return "R_f"
        return emit(op.name, [self.ref(a) for a in op.args], dict(op.attrs), self.m)

    def stmt(self, i: int) -> str:
        op = self.prog.ops[i]
        if op.kind == "elem":
            return f"const float v{i} = {self.expr(i)};"
        if i in self.scalar:
            return f"const float r{i} = {self.expr(i)};"
        return f"r{i}[t] = {self.expr(i)};"

    def used_operands(self, ops: list[int], extra: Sequence[Arg] = ()) -> list[Operand]:
        names = {a for i in ops for a in self.prog.ops[i].args if isinstance(a, str)}
        names |= {a for a in extra if isinstance(a, str)}
        return [
            op for name, op in self.operands.items() if name in names and op.pattern != "scalar"
        ]

    def loads(self, operands: list[Operand], flat: str = "f") -> list[str]:
        return [
            f"const float in_{op.name} = {op.name}_p[{operand_index(op, flat)}];" for op in operands
        ]


_SIGNATURE = re.compile(r"void HTAM_FN\(([^)]*)\)")


def python_binding(fn: str, body: str) -> str:
    """A METH_FASTCALL wrapper and the module init (``PyInit_<fn>``) for the ``void HTAM_FN(...)``
    of ``body``, named ``fn``: pointers arrive as integers (``t.data_ptr()``), sizes as ints.
    Python's C API only, so the build parses no pybind11 or torch headers."""
    signature = _SIGNATURE.search(body)
    if signature is None:
        raise ValueError("the extension's body defines no HTAM_FN function")
    params = [p.strip() for p in signature.group(1).split(",")]
    decls, names = [], []
    for i, param in enumerate(params):
        ctype = param.rsplit(" ", 1)[0].replace("__restrict__", "").strip()
        if ctype.endswith("*"):
            value = f"static_cast<{ctype}>(PyLong_AsVoidPtr(args[{i}]))"
        elif ctype in ("int64_t", "std::int64_t"):
            value = f"(int64_t)PyLong_AsLongLong(args[{i}])"
        else:
            raise ValueError(f"a C++ kernel parameter of unsupported type: {param!r}")
        decls.append(f"  {ctype} a{i} = {value};")
        names.append(f"a{i}")
    n = len(params)
    lines = [
        f"static PyObject* {fn}_py(PyObject*, PyObject* const* args, Py_ssize_t nargs) {{",
        f"  if (nargs != {n}) {{",
        f'    PyErr_Format(PyExc_TypeError, "{fn} takes {n} arguments (%zd given)", nargs);',
        "    return nullptr;",
        "  }",
        *decls,
        "  if (PyErr_Occurred()) return nullptr;",
        "  Py_BEGIN_ALLOW_THREADS",
        f"  {fn}({', '.join(names)});",
        "  Py_END_ALLOW_THREADS",
        "  Py_RETURN_NONE;",
        "}",
        f"static PyMethodDef {fn}_methods[] = {{",
        f'    {{"{fn}", (PyCFunction)(void (*)(void)){fn}_py, METH_FASTCALL, nullptr}},',
        "    {nullptr, nullptr, 0, nullptr}};",
        f"static PyModuleDef {fn}_module = "
        f'{{PyModuleDef_HEAD_INIT, "{fn}", nullptr, -1, {fn}_methods}};',
        f"PyMODINIT_FUNC PyInit_{fn}(void) {{ return PyModule_Create(&{fn}_module); }}",
    ]
    return "\n".join(lines) + "\n"


def cpp_names(family: str, body: str) -> tuple[str, str]:
    """(function name, full C++ source): the name is a hash of the body, so identical code
    reuses one compiled extension, and distinct code never collides (even when combined). The
    source is the body with its function made static and named, then a Python module of that
    name calling it (:func:`python_binding`)."""
    digest = hashlib.sha1(body.encode()).hexdigest()[:12]
    fn = f"htam_{family}_{digest}"
    kernel = body.replace("void HTAM_FN(", "static void HTAM_FN(", 1).replace("HTAM_FN", fn)
    return fn, kernel.rstrip() + "\n\n" + python_binding(fn, body)
