"""Rendering SSA programs into Triton statements over a tile of flat output indices.

Element values are tiles (``v{i}``), per-row values are ``[ROWS]`` vectors (``r{i}``) that
broadcast as ``r{i}[:, None]`` into element tiles, operands are loaded into ``in_{name}``.
"""

from __future__ import annotations

from collections.abc import Sequence

from htam.offline.ir.expr import Math, emit, literal
from htam.offline.ir.model import ACC, Arg, Operand, Program


def operand_index(op: Operand, flat: str) -> str:
    """Element of ``op`` read at output position ``flat`` (see :class:`Operand`)."""
    n = op.name
    if op.pattern == "full":
        return flat
    if op.pattern == "trail":
        return f"{flat} % {n}_numel"
    if op.pattern == "lead":
        return f"{flat} // {n}_inner"
    return f"({flat} // {n}_inner) % {n}_numel"


def operand_params(ops: list[Operand]) -> list[str]:
    """Kernel parameters for the operands: the pointer, then the sizes its pattern needs."""
    out = []
    for op in ops:
        out.append(f"{op.name}_ptr")
        if op.pattern in ("trail", "mid"):
            out.append(f"{op.name}_numel")
        if op.pattern in ("lead", "mid"):
            out.append(f"{op.name}_inner")
    return out


def operand_args(ops: list[Operand], out_var: str) -> list[str]:
    """Python launch arguments matching :func:`operand_params` (tensors are ``t_{name}``)."""
    out = []
    for op in ops:
        out.append(f"t_{op.name}")
        if op.pattern in ("trail", "mid"):
            out.append(f"t_{op.name}.numel()")
        if op.pattern in ("lead", "mid"):
            out.append(f"_inner({out_var}.shape, {op.tail})")
    return out


class TileProgram:
    """Emits the ops of ``prog`` as Triton statements."""

    def __init__(self, prog: Program, operands: list[Operand], m: Math, acc: str = "acc"):
        self.prog = prog
        self.operands = {op.name: op for op in operands}
        self.m = m
        self.acc = acc
        self.scalar = self._scalar_ops()

    def _scalar_ops(self) -> set[int]:
        """Row ops with no per-row input (e.g. functions of rsize): plain scalars, not [ROWS]."""
        out: set[int] = set()
        for i, op in enumerate(self.prog.ops):
            if op.kind == "row" and op.name not in ("rsum", "rmax", "rmin", "rargmax", "rargmin"):
                if all(self.is_scalar(a, out) for a in op.args):
                    out.add(i)
        return out

    def is_scalar(self, a: Arg, known: set[int] | None = None) -> bool:
        known = self.scalar if known is None else known
        if isinstance(a, float):
            return True
        if isinstance(a, str):
            return a != ACC and self.operands[a].pattern == "scalar"
        return a in known

    def ref(self, a: Arg, elem: bool) -> str:
        """How an op refers to ``a``; ``elem`` when the op is an element op."""
        if isinstance(a, float):
            return literal(a, "triton")
        if isinstance(a, str):
            return self.acc if a == ACC else f"in_{a}"
        op = self.prog.ops[a]
        if op.kind == "elem":
            return f"v{a}"
        if elem and a not in self.scalar:
            return f"r{a}[:, None]"
        return f"r{a}"

    def var(self, i: int) -> str:
        return f"v{i}" if self.prog.ops[i].kind == "elem" else f"r{i}"

    def stmt(self, i: int) -> str:
        op = self.prog.ops[i]
        if op.name == "rsize":
            return f"r{i} = R_f"
        args = [self.ref(a, op.kind == "elem") for a in op.args]
        return f"{self.var(i)} = {emit(op.name, args, dict(op.attrs), self.m)}"

    def used_operands(self, ops: list[int], extra: Sequence[Arg] = ()) -> list[Operand]:
        names = {a for i in ops for a in self.prog.ops[i].args if isinstance(a, str)}
        names |= {a for a in extra if isinstance(a, str)}
        return [op for name, op in self.operands.items() if name in names]

    def loads(self, operands: list[Operand], flat: str, mask: str | None) -> list[str]:
        """Loads of non-scalar operands at the tile's flat indices."""
        out = []
        for op in operands:
            if op.pattern == "scalar":
                continue
            m = f", mask={mask}, other=0.0" if mask else ""
            out.append(f"in_{op.name} = tl.load({op.name}_ptr + {operand_index(op, flat)}{m})")
        return out

    def scalar_loads(self) -> list[str]:
        return [
            f"in_{op.name} = tl.load({op.name}_ptr)"
            for op in self.operands.values()
            if op.pattern == "scalar"
        ]
