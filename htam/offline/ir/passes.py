"""Schedule a row program into passes over each row, with the one-pass rewrites.

Pass ``p`` computes every reduction whose argument needs ``p - 1`` finished reductions. Two
rewrites fold a dependent reduction into the pass of the one it depends on:

- online softmax: ``s = rsum(exp(a - m))`` with ``m = rmax(a)`` becomes one pass keeping a running
  max and rescaling the running sum by ``exp(m_old - m_new)``;
- Welford: ``q = rsum(square(a - mu))`` with ``mu = rsum(a) / rsize`` becomes one pass keeping a
  running count, mean and M2 (``q = M2``, ``rsum(a) = mean * R``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from htam.offline.ir.expr import EXP_OPS
from htam.offline.ir.model import REDUCTIONS, Arg, Op, Program, RowIR


@dataclass(frozen=True)
class Red:
    method: str  # "plain" | "online" | "welford"
    ops: tuple[int, ...]  # plain: (r,); online: (max, sum); welford: (sum, sum of squares)
    arg: Arg  # the element value reduced (for online/welford, the shared input ``a``)
    name: str = ""  # the reduction primitive of ops[0] (rsum, rmax, ...)

    @property
    def kind(self) -> str:
        """What the accumulators hold: the primitive, or "online" / "welford"."""
        return self.name if self.method == "plain" else self.method


@dataclass
class Pass:
    reds: list[Red] = field(default_factory=list)
    elems: list[int] = field(default_factory=list)  # elem ops evaluated in the loop body
    after: list[int] = field(default_factory=list)  # row ops evaluated when the pass ends


@dataclass
class Schedule:
    before: list[int]  # row ops that need no pass (arithmetic on rsize)
    passes: list[Pass]
    final: list[int]  # elem ops of the output loop (empty for a per-row output)


def _op(prog: Program, a: Arg, name: str) -> Op | None:
    return prog.ops[a] if isinstance(a, int) and prog.ops[a].name == name else None


def online_pairs(prog: Program) -> dict[int, tuple[int, Arg]]:
    """sum op -> (max op, a) for every rsum(exp(a - rmax(a)))."""
    pairs = {}
    for i, op in enumerate(prog.ops):
        e = _op(prog, op.args[0], "exp") if op.name == "rsum" else None
        d = _op(prog, e.args[0], "sub") if e else None
        if d and isinstance(d.args[1], int) and prog.ops[d.args[1]].name == "rmax":
            if prog.ops[d.args[1]].args[0] == d.args[0]:
                pairs[i] = (d.args[1], d.args[0])
    return pairs


def welford_pairs(prog: Program) -> dict[int, tuple[int, Arg]]:
    """sum-of-squares op -> (sum op, a) for every rsum(square(a - rsum(a) / rsize))."""
    pairs = {}
    for i, op in enumerate(prog.ops):
        sq = _op(prog, op.args[0], "square") if op.name == "rsum" else None
        d = _op(prog, sq.args[0], "sub") if sq else None
        mu = _op(prog, d.args[1], "div") if d else None
        s = _op(prog, mu.args[0], "rsum") if mu else None
        # s found implies mu and d found (an Op is always truthy): the checks say so to mypy
        if s and mu and d and _op(prog, mu.args[1], "rsize") and s.args[0] == d.args[0]:
            pairs[i] = (cast(int, mu.args[0]), d.args[0])  # s is that op: an index
    return pairs


def row_features(ir: RowIR) -> dict[str, bool]:
    return {
        "online_softmax": bool(online_pairs(ir.prog)),
        "welford": bool(welford_pairs(ir.prog)),
        "strided_rows": ir.d1 < ir.rank - 1,
        "has_exp": any(op.name in EXP_OPS for op in ir.prog.ops),
    }


def elem_closure(prog: Program, roots: list[Arg]) -> list[int]:
    """Elem ops needed to evaluate ``roots`` in a loop body (row values are already known)."""
    need: set[int] = set()
    stack = [r for r in roots if isinstance(r, int)]
    while stack:
        i = stack.pop()
        if i in need or prog.ops[i].kind != "elem":
            continue
        need.add(i)
        stack.extend(a for a in prog.ops[i].args if isinstance(a, int))
    return sorted(need)


def schedule(prog: Program, online: bool, welford: bool) -> Schedule:
    merged: dict[int, tuple[str, int, Arg]] = {}
    if online:
        merged.update({s: ("online", m, a) for s, (m, a) in online_pairs(prog).items()})
    if welford:
        merged.update({q: ("welford", s, a) for q, (s, a) in welford_pairs(prog).items()})
    firsts: dict[int, tuple[str, int]] = {}
    for second, (method, first, _) in sorted(merged.items()):
        if first in firsts:  # one partner per reduction; the other stays a plain pass
            del merged[second]
        else:
            firsts[first] = (method, second)
    stage: list[int] = []
    for i, op in enumerate(prog.ops):
        deps = [stage[a] for a in op.args if isinstance(a, int)]
        if i in merged:
            stage.append(stage[merged[i][1]])
        elif op.name in REDUCTIONS:
            stage.append(1 + max(deps, default=0))
        else:
            stage.append(max(deps, default=0))
    n_passes = max((stage[i] for i, op in enumerate(prog.ops) if op.name in REDUCTIONS), default=0)
    passes = [Pass() for _ in range(n_passes)]
    for i, op in enumerate(prog.ops):
        if op.name in REDUCTIONS and i not in merged:
            method, partner = firsts.get(i, ("plain", None))
            ops = (i,) if partner is None else (i, partner)
            passes[stage[i] - 1].reds.append(Red(method, ops, op.args[0], op.name))
        elif op.kind == "row" and op.name not in REDUCTIONS and stage[i] > 0:
            passes[stage[i] - 1].after.append(i)
    for p in passes:
        p.elems = elem_closure(prog, [r.arg for r in p.reds])
    before = [
        i
        for i, op in enumerate(prog.ops)
        if op.kind == "row" and op.name not in REDUCTIONS and stage[i] == 0
    ]
    out_is_elem = isinstance(prog.out, int) and prog.ops[prog.out].kind == "elem"
    final = elem_closure(prog, [prog.out]) if out_is_elem else []
    return Schedule(before, passes, final)
