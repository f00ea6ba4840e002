"""Triton accumulators for the reductions of one pass: init, per-tile update, finish.

``lanes`` (the warp-shuffle strategy) keeps one partial per lane of the ``[ROWS, BLOCK]`` tile and
reduces across lanes once at the end; without it every tile is reduced to ``[ROWS]`` at once.
"""

from __future__ import annotations

from htam.offline.ir.expr import Math
from htam.offline.ir.passes import Red

BIG = "2147483647"
NEG = "float('-inf')"
POS = "float('inf')"


def _shape(lanes: bool) -> str:
    return "[ROWS, BLOCK]" if lanes else "[ROWS]"


def init(red: Red, lanes: bool) -> list[str]:
    i, s = red.ops[0], _shape(lanes)
    name = red.kind
    if name == "rsum":
        return [f"a{i} = tl.zeros({s}, tl.float32)"]
    if name in ("rmax", "rmin"):
        return [f"a{i} = tl.full({s}, {NEG if name == 'rmax' else POS}, tl.float32)"]
    if name in ("rargmax", "rargmin"):
        start = NEG if name == "rargmax" else POS
        return [f"a{i} = tl.full({s}, {start}, tl.float32)", f"ai{i} = tl.zeros({s}, tl.int32)"]
    if name == "online":  # a finite floor keeps exp(m_old - m_new) away from inf - inf
        return [f"m{i} = tl.full({s}, -1e30, tl.float32)", f"s{i} = tl.zeros({s}, tl.float32)"]
    return [
        f"wn{i} = tl.zeros({s}, tl.float32)",
        f"wm{i} = tl.zeros({s}, tl.float32)",
        f"wq{i} = tl.zeros({s}, tl.float32)",
    ]


def update(red: Red, x: str, masked: bool, lanes: bool, m: Math) -> list[str]:
    """Fold the tile value ``x`` (a [ROWS, BLOCK] expression) into the accumulators."""
    i = red.ops[0]
    name = red.kind

    def where(v: str, other: str) -> str:
        return f"tl.where(cmask, {v}, {other})" if masked else v

    if name == "rsum":
        v = where(x, "0.0")
        return [f"a{i} += {v}" if lanes else f"a{i} += tl.sum({v}, axis=1)"]
    if name in ("rmax", "rmin"):
        f, ident = ("maximum", NEG) if name == "rmax" else ("minimum", POS)
        v = where(x, ident)
        red_v = v if lanes else f"tl.{f[:3]}({v}, axis=1)"
        return [f"a{i} = tl.{f}(a{i}, {red_v})"]
    if name in ("rargmax", "rargmin"):
        return _arg_update(i, where(x, NEG if name == "rargmax" else POS), name, lanes)
    if name == "online":
        return _online_update(i, where(x, NEG), lanes, m)
    return _welford_update(i, x, masked, lanes)


def _arg_update(i: int, v: str, name: str, lanes: bool) -> list[str]:
    cmp, f = (">", "max") if name == "rargmax" else ("<", "min")
    lines = [f"xv = {v}"]
    if lanes:
        return lines + [
            f"up = xv {cmp} a{i}",
            f"a{i} = tl.where(up, xv, a{i})",
            f"ai{i} = tl.where(up, cols[None, :], ai{i})",
        ]
    return lines + [
        f"tv = tl.{f}(xv, axis=1)",
        f"ti = tl.min(tl.where(xv == tv[:, None], cols[None, :], {BIG}), axis=1)",
        f"up = tv {cmp} a{i}",
        f"a{i} = tl.where(up, tv, a{i})",
        f"ai{i} = tl.where(up, ti, ai{i})",
    ]


def _online_update(i: int, v: str, lanes: bool, m: Math) -> list[str]:
    if lanes:
        return [
            f"xv = {v}",
            f"mn = tl.maximum(m{i}, xv)",
            f"s{i} = s{i} * {m.exp(f'm{i} - mn')} + {m.exp('xv - mn')}",
            f"m{i} = mn",
        ]
    return [
        f"xv = {v}",
        f"mn = tl.maximum(m{i}, tl.max(xv, axis=1))",
        f"s{i} = s{i} * {m.exp(f'm{i} - mn')} + tl.sum({m.exp('xv - mn[:, None]')}, axis=1)",
        f"m{i} = mn",
    ]


def _welford_update(i: int, x: str, masked: bool, lanes: bool) -> list[str]:
    if lanes:  # one running (count, mean, M2) per lane
        one = "tl.where(cmask, 1.0, 0.0)" if masked else "1.0"
        step = f"tl.where(cmask, wd / tl.maximum(wn{i}, 1.0), 0.0)" if masked else f"wd / wn{i}"
        q = f"tl.where(cmask, wd * ({x} - wm{i}), 0.0)" if masked else f"wd * ({x} - wm{i})"
        return [
            f"wn{i} = wn{i} + {one}",
            f"wd = {x} - wm{i}",
            f"wm{i} = wm{i} + {step}",
            f"wq{i} = wq{i} + {q}",
        ]
    # Chan et al.: merge the tile's (count, mean, M2) into the running ones.
    tn = "tl.sum(tl.where(cmask, 1.0, 0.0), axis=1)" if masked else "BLOCK * 1.0"
    xs = f"tl.where(cmask, {x}, 0.0)" if masked else x
    td = f"tl.where(cmask, {x} - tmean[:, None], 0.0)" if masked else f"{x} - tmean[:, None]"
    return [
        f"tn = {tn}",
        f"tmean = tl.sum({xs}, axis=1) / tn",
        f"td = {td}",
        "tq = tl.sum(td * td, axis=1)",
        f"nn = wn{i} + tn",
        f"dl = tmean - wm{i}",
        f"wm{i} = wm{i} + dl * (tn / nn)",
        f"wq{i} = wq{i} + tq + dl * dl * (wn{i} * tn / nn)",
        f"wn{i} = nn",
    ]


def finish(red: Red, lanes: bool, m: Math) -> list[str]:
    """Row values ``r{op}`` for every op the accumulators produce."""
    i = red.ops[0]
    name = red.kind
    if name == "rsum":
        return [f"r{i} = tl.sum(a{i}, axis=1)" if lanes else f"r{i} = a{i}"]
    if name in ("rmax", "rmin"):
        return [f"r{i} = tl.{name[1:]}(a{i}, axis=1)" if lanes else f"r{i} = a{i}"]
    if name in ("rargmax", "rargmin"):
        if not lanes:
            return [f"r{i} = ai{i}"]
        f = name[4:]
        return [
            f"bv = tl.{f}(a{i}, axis=1)",
            f"r{i} = tl.min(tl.where(a{i} == bv[:, None], ai{i}, {BIG}), axis=1)",
        ]
    second = red.ops[1]
    if name == "online":
        if not lanes:
            return [f"r{i} = m{i}", f"r{second} = s{i}"]
        return [
            f"r{i} = tl.max(m{i}, axis=1)",
            f"r{second} = tl.sum(s{i} * {m.exp(f'm{i} - r{i}[:, None]')}, axis=1)",
        ]
    if not lanes:
        return [f"r{i} = wm{i} * wn{i}", f"r{second} = wq{i}"]
    return [
        f"wt = tl.sum(wn{i}, axis=1)",
        f"wmu = tl.sum(wn{i} * wm{i}, axis=1) / wt",
        f"wdv = wm{i} - wmu[:, None]",
        f"r{second} = tl.sum(wq{i}, axis=1) + tl.sum(wn{i} * wdv * wdv, axis=1)",
        f"r{i} = wmu * wt",
    ]
