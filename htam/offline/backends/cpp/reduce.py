"""C++ accumulators for one pass: per row ``t`` of the tile and per lane ``l`` (init/update/finish).

With the warp-shuffle strategy there are 8 lanes (column ``c`` feeds lane ``c & 7``): independent
partial results that break the serial dependency of one accumulator, combined once per row at the
end — the CPU counterpart of per-lane partials reduced by a shuffle tree.
"""

from __future__ import annotations

from htam.offline.ir.expr import Math
from htam.offline.ir.passes import Red


def _arrays(names: list[str], value: str, ctype: str = "float") -> list[str]:
    out = []
    for n in names:
        out += [
            f"{ctype} {n}[ROWS][LANES];",
            f"for (int64_t t = 0; t < ROWS; ++t) for (int64_t l = 0; l < LANES; ++l) "
            f"{n}[t][l] = {value};",
        ]
    return out


def init(red: Red) -> list[str]:
    i, kind = red.ops[0], red.kind
    if kind == "rsum":  # in double: a float over 1 M elements drifts 0.3% (KernelBench L1 100)
        return _arrays([f"a{i}"], "0.0", "double")
    if kind in ("rmax", "rargmax"):
        lines = _arrays([f"a{i}"], "-INFINITY")
        return lines + (_arrays([f"ai{i}"], "0", "int64_t") if kind == "rargmax" else [])
    if kind in ("rmin", "rargmin"):
        lines = _arrays([f"a{i}"], "INFINITY")
        return lines + (_arrays([f"ai{i}"], "0", "int64_t") if kind == "rargmin" else [])
    if kind == "online":  # a finite floor keeps exp(m_old - m_new) away from inf - inf
        return _arrays([f"m{i}"], "-1e30f") + _arrays([f"s{i}"], "0.0f")
    return _arrays([f"wn{i}", f"wm{i}", f"wq{i}"], "0.0f")


def update(red: Red, x: str, m: Math) -> list[str]:
    """Fold the element value ``x`` (column ``c``, row ``t``, lane ``l``) in."""
    i, kind = red.ops[0], red.kind
    at = "[t][l]"
    if kind == "rsum":
        return [f"a{i}{at} += {x};"]
    if kind in ("rmax", "rmin"):
        return [f"a{i}{at} = std::{kind[1:]}(a{i}{at}, {x});"]
    if kind in ("rargmax", "rargmin"):
        cmp = ">" if kind == "rargmax" else "<"
        return [
            "{",
            f"  const float xv = {x};",
            f"  if (xv {cmp} a{i}{at}) {{ a{i}{at} = xv; ai{i}{at} = c; }}",
            "}",
        ]
    if kind == "online":
        return [
            "{",
            f"  const float xv = {x};",
            f"  const float mn = std::max(m{i}{at}, xv);",
            f"  s{i}{at} = s{i}{at} * {m.exp(f'm{i}{at} - mn')} + {m.exp('xv - mn')};",
            f"  m{i}{at} = mn;",
            "}",
        ]
    return [
        "{",
        f"  const float xv = {x};",
        f"  wn{i}{at} += 1.0f;",
        f"  const float wd = xv - wm{i}{at};",
        f"  wm{i}{at} += wd / wn{i}{at};",
        f"  wq{i}{at} += wd * (xv - wm{i}{at});",
        "}",
    ]


def finish(red: Red, m: Math) -> list[str]:
    """Per-row results ``r{op}[t]`` of every op the accumulators produce."""
    i, kind = red.ops[0], red.kind
    loop = "for (int64_t l = 0; l < LANES; ++l)"
    if kind == "rsum":
        body = [f"double v = 0.0; {loop} v += a{i}[t][l];", f"r{i}[t] = (float)v;"]
    elif kind in ("rmax", "rmin"):
        body = [
            f"float v = a{i}[t][0]; {loop} v = std::{kind[1:]}(v, a{i}[t][l]);",
            f"r{i}[t] = v;",
        ]
    elif kind in ("rargmax", "rargmin"):
        cmp = ">" if kind == "rargmax" else "<"
        body = [
            f"float bv = a{i}[t][0]; int64_t bi = ai{i}[t][0];",
            f"{loop} if (a{i}[t][l] {cmp} bv || (a{i}[t][l] == bv && ai{i}[t][l] < bi)) "
            f"{{ bv = a{i}[t][l]; bi = ai{i}[t][l]; }}",
            f"r{i}[t] = (float)bi;",
        ]
    elif kind == "online":
        s = red.ops[1]
        body = [
            f"float mx = m{i}[t][0]; {loop} mx = std::max(mx, m{i}[t][l]);",
            f"float sm = 0.0f; {loop} sm += s{i}[t][l] * {m.exp(f'm{i}[t][l] - mx')};",
            f"r{i}[t] = mx; r{s}[t] = sm;",
        ]
    else:  # Chan et al.: merge the lanes' (count, mean, M2)
        q = red.ops[1]
        body = [
            "float n = 0.0f, mu = 0.0f, m2 = 0.0f;",
            f"{loop} {{ n += wn{i}[t][l]; mu += wn{i}[t][l] * wm{i}[t][l]; }}",
            "mu /= n;",
            f"{loop} {{ const float d = wm{i}[t][l] - mu; m2 += wq{i}[t][l] + wn{i}[t][l] * d * d; }}",
            f"r{i}[t] = mu * n; r{q}[t] = m2;",
        ]
    return ["for (int64_t t = 0; t < nt; ++t) {", *("  " + s for s in body), "}"]
