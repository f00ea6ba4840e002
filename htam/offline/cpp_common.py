"""Rendering SSA programs into C++ statements (float math, OpenMP loops).

The generated function is named ``HTAM_FN``; :func:`htam.offline.render.cpp_names` replaces it
with a name derived from the hash of the source. Sizes are arguments, so one build serves every
shape.
"""

from __future__ import annotations

from htam.offline.expr import Math, emit, literal
from htam.offline.ir import ACC, Arg, Operand, Program

# Below this many elements (or multiply-adds) a parallel region costs more than it saves: waking
# threads on a busy machine can take a scheduler time slice (milliseconds).
HEADER = (
    "#include <torch/extension.h>\n#include <algorithm>\n#include <cmath>\n#include <vector>\n"
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
    """(tensor parameters, size parameters) of the C++ function for the operands."""
    tensors = [f"torch::Tensor {op.name}" for op in ops]
    sizes = []
    for op in ops:
        if op.pattern in ("trail", "mid"):
            sizes.append(f"int64_t {op.name}_numel")
        if op.pattern in ("lead", "mid"):
            sizes.append(f"int64_t {op.name}_inner")
    return tensors, sizes


def operand_args(ops: list[Operand], out_var: str) -> tuple[list[str], list[str]]:
    """Python call arguments matching :func:`operand_params`."""
    tensors = [f"t_{op.name}" for op in ops]
    sizes = []
    for op in ops:
        if op.pattern in ("trail", "mid"):
            sizes.append(f"t_{op.name}.numel()")
        if op.pattern in ("lead", "mid"):
            sizes.append(f"_inner({out_var}.shape, {op.tail})")
    return tensors, sizes


def pointers(ops: list[Operand]) -> list[str]:
    lines = [f"const float* __restrict__ {op.name}_p = {op.name}.data_ptr<float>();" for op in ops]
    lines += [f"const float s_{op.name} = {op.name}_p[0];" for op in ops if op.pattern == "scalar"]
    return lines


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

    def used_operands(self, ops: list[int], extra: list[Arg] = ()) -> list[Operand]:
        names = {a for i in ops for a in self.prog.ops[i].args if isinstance(a, str)}
        names |= {a for a in extra if isinstance(a, str)}
        return [
            op for name, op in self.operands.items() if name in names and op.pattern != "scalar"
        ]

    def loads(self, operands: list[Operand], flat: str = "f") -> list[str]:
        return [
            f"const float in_{op.name} = {op.name}_p[{operand_index(op, flat)}];" for op in operands
        ]
