"""One expression per primitive op, in Triton or in C++ (float math), from rendered arguments.

Arguments arrive as variable names (or literals), so an expression may use one several times.
``exp2=True`` (the fast_exp2 strategy) computes every exponential as ``exp2(x * log2(e))``,
which maps to one MUFU.EX2 instruction on NVIDIA GPUs.
"""

from __future__ import annotations

import math

LOG2E = 1.4426950408889634
# Primitives whose expression computes an exponential (where the fast_exp2 strategy applies).
EXP_OPS = frozenset(
    {
        "exp",
        "sigmoid",
        "silu",
        "tanh",
        "gelu_tanh",
        "elu",
        "selu",
        "softplus",
        "mish",
        "logsigmoid",
        "expm1",
    }
)


def literal(x: float, lang: str) -> str:
    if math.isinf(x):
        if lang == "cpp":
            return "INFINITY" if x > 0 else "(-INFINITY)"
        return "float('inf')" if x > 0 else "float('-inf')"
    if math.isnan(x):
        return "NAN" if lang == "cpp" else "float('nan')"
    text = repr(float(x)) + ("f" if lang == "cpp" else "")
    return f"({text})" if x < 0 else text


class Math:
    def __init__(self, lang: str, exp2: bool = False):
        self.lang = lang
        self.exp2 = exp2
        self.ns = "tl." if lang == "triton" else "std::"

    def c(self, x: float) -> str:
        return literal(x, self.lang)

    def fn(self, name: str, *args: str) -> str:
        return f"{self.ns}{name}({', '.join(args)})"

    def max(self, a: str, b: str) -> str:
        return self.fn("maximum" if self.lang == "triton" else "max", a, b)

    def min(self, a: str, b: str) -> str:
        return self.fn("minimum" if self.lang == "triton" else "min", a, b)

    def where(self, cond: str, a: str, b: str) -> str:
        if self.lang == "triton":
            return f"tl.where({cond}, {a}, {b})"
        return f"(({cond}) ? ({a}) : ({b}))"

    def exp(self, e: str) -> str:
        if self.exp2:
            return self.fn("exp2", f"({e}) * {self.c(LOG2E)}")
        return self.fn("exp", e)

    def tanh(self, e: str) -> str:
        if self.lang == "cpp" and not self.exp2:
            return self.fn("tanh", e)
        # 2 / (1 + exp(-2e)) - 1 saturates correctly at both ends (no inf/inf).
        return f"({self.c(2.0)} / ({self.c(1.0)} + {self.exp(f'{self.c(-2.0)} * ({e})')}) - {self.c(1.0)})"

    def softplus_core(self, z: str) -> str:
        """log(1 + exp(z)) without overflow."""
        e = self.exp("-" + self.fn("abs", z))
        return f"({self.max(z, self.c(0.0))} + {self.fn('log', f'{self.c(1.0)} + {e}')})"


def emit(op: str, args: list[str], attrs: dict, m: Math) -> str:
    """The expression computing ``op`` (an elementwise primitive) of ``args``."""
    a = args[0] if args else ""
    b = args[1] if len(args) > 1 else ""
    c = m.c
    binary = {"add": f"{a} + {b}", "sub": f"{a} - {b}", "mul": f"{a} * {b}", "div": f"{a} / {b}"}
    if op in binary:
        return binary[op]
    if op in _COMPARE:  # a mask of 0.0 / 1.0
        return m.where(f"{a} {_COMPARE[op]} {b}", c(1.0), c(0.0))
    if op == "where":  # the condition is a mask (0.0 / 1.0) or a bool input read as one
        return m.where(f"{a} != {c(0.0)}", b, args[2])
    if op == "maximum":
        return m.max(a, b)
    if op == "minimum":
        return m.min(a, b)
    if op in _UNARY:
        return _UNARY[op](a, m, c)
    if op == "leaky_relu":
        return m.where(f"{a} >= {c(0.0)}", a, f"{a} * {c(attrs['slope'])}")
    if op == "elu":
        return m.where(f"{a} > {c(0.0)}", a, f"{c(attrs['alpha'])} * ({m.exp(a)} - {c(1.0)})")
    if op == "softplus":
        beta, thr = attrs["beta"], attrs["threshold"]
        z = f"({c(beta)} * {a})"
        return m.where(f"{z} > {c(thr)}", a, f"{m.softplus_core(z)} / {c(beta)}")
    if op == "clamp":
        out = a
        if attrs.get("lo") is not None:
            out = m.max(out, c(attrs["lo"]))
        if attrs.get("hi") is not None:
            out = m.min(out, c(attrs["hi"]))
        return out
    if op == "powi":
        return _powi(a, attrs["n"], c)
    if op == "powf":
        if m.lang == "cpp":
            return m.fn("pow", a, c(attrs["p"]))
        return f"tl.exp2({c(attrs['p'])} * tl.log2({a}))"
    raise ValueError(f"no expression for primitive {op!r}")


def _powi(a: str, n: int, c) -> str:
    if n == 0:
        return f"({a} * {c(0.0)} + {c(1.0)})"
    prod = " * ".join([a] * abs(n))
    return f"({prod})" if n > 0 else f"({c(1.0)} / ({prod}))"


def _gelu_tanh(a: str, m: Math, c) -> str:
    inner = f"{c(0.7978845608028654)} * ({a} + {c(0.044715)} * {a} * {a} * {a})"
    return f"{c(0.5)} * {a} * ({c(1.0)} + {m.tanh(inner)})"


def _hardsigmoid(a: str, m: Math, c) -> str:
    return f"{m.min(m.max(f'{a} + {c(3.0)}', c(0.0)), c(6.0))} / {c(6.0)}"


_UNARY = {
    "relu": lambda a, m, c: m.max(a, c(0.0)),
    "sigmoid": lambda a, m, c: f"{c(1.0)} / ({c(1.0)} + {m.exp(f'-{a}')})",
    "tanh": lambda a, m, c: m.tanh(a),
    "silu": lambda a, m, c: f"{a} / ({c(1.0)} + {m.exp(f'-{a}')})",
    "exp": lambda a, m, c: m.exp(a),
    "exp2": lambda a, m, c: m.fn("exp2", a),
    "log": lambda a, m, c: m.fn("log", a),
    "abs": lambda a, m, c: m.fn("abs", a),
    "neg": lambda a, m, c: f"-{a}",
    "sqrt": lambda a, m, c: m.fn("sqrt", a),
    "rsqrt": lambda a, m, c: (
        m.fn("rsqrt", a) if m.lang == "triton" else f"{c(1.0)} / {m.fn('sqrt', a)}"
    ),
    "square": lambda a, m, c: f"{a} * {a}",
    "reciprocal": lambda a, m, c: f"{c(1.0)} / {a}",
    "gelu_erf": lambda a, m, c: (
        f"{c(0.5)} * {a} * ({c(1.0)} + {m.fn('erf', f'{a} * {c(0.7071067811865476)}')})"
    ),
    "gelu_tanh": _gelu_tanh,
    "mish": lambda a, m, c: f"{a} * {m.tanh(m.softplus_core(a))}",
    "selu": lambda a, m, c: (
        f"{c(1.0507009873554805)} * {m.where(f'{a} > {c(0.0)}', a, f'{c(1.6732632423543772)} * ({m.exp(a)} - {c(1.0)})')}"
    ),
    "hardsigmoid": _hardsigmoid,
    "hardswish": lambda a, m, c: f"{a} * {_hardsigmoid(a, m, c)}",
    "softsign": lambda a, m, c: f"{a} / ({c(1.0)} + {m.fn('abs', a)})",
    "logsigmoid": lambda a, m, c: f"(-{m.softplus_core(f'-{a}')})",
    "sin": lambda a, m, c: m.fn("sin", a),
    "cos": lambda a, m, c: m.fn("cos", a),
    "floor": lambda a, m, c: m.fn("floor", a),
    "erf": lambda a, m, c: m.fn("erf", a),
    "log1p": lambda a, m, c: m.fn("log1p", a) if m.lang == "cpp" else f"tl.log({c(1.0)} + {a})",
    "expm1": lambda a, m, c: (
        m.fn("expm1", a) if m.lang == "cpp" and not m.exp2 else f"({m.exp(a)} - {c(1.0)})"
    ),
}

_COMPARE = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}

SUPPORTED = set(_UNARY) | set(_COMPARE) | {
    "where",
    "add",
    "sub",
    "mul",
    "div",
    "maximum",
    "minimum",
    "leaky_relu",
    "elu",
    "softplus",
    "clamp",
    "powi",
    "powf",
}
