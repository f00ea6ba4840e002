"""Library call + fused epilogue: torch computes a prefix, one generated kernel the chain after it.

KernelBench level 2 is mostly a convolution or a matrix product followed by a chain of
elementwise ops and reductions. The library operation (cuDNN / cuBLAS through torch) stays a torch
call, run exactly as the reference runs it (``self.conv(x)``: the module's own parameters, so
``get_init_inputs`` and the module's initialization are honoured), and the longest chain after it
that the elementwise or row templates cover becomes ONE kernel reading the library output as an
operand.

The cut: the prefix starts as every library operation (an ``opaque`` one the templates cannot
express: convolutions, pooling, norms...; or a matrix product) with everything it needs; while
the rest does not build as a kernel program, the first remaining operation in the reference's
program order (with what it needs) joins the prefix. The kernel is the longest fusable tail.
Operations between two library calls (a ReLU before a pooling) stay torch code in
the prefix; the summary names the prefix, so a task whose tail is short says so.

The prefix code is the reference's own fx graph restricted to the prefix, printed by
``torch.fx`` (``self.conv(x)``, ``torch.max_pool2d(...)``): nothing is re-implemented.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple, cast

import torch
import torch.fx as fx

from htam.offline.front.lower import CNode, lower
from htam.offline.front.trace import NoMatch, Traced
from htam.offline.ir.model import LIBRARY_PREFIX, EwIR, GemmIR, RowIR
from htam.offline.matcher.build import GEMM_OPS
from htam.offline.matcher.gemm import match_gemm
from htam.offline.matcher.layers import heavy as _heavy
from htam.offline.matcher.layers import layers as _layers

# Names fx's printed code may use; anything else (a helper function's global) is refused.
_GLOBALS_OK = {"torch", "inf", "nan", "NoneType", "device", "fx_pytree", "pytree", "getattr"}
_NONE_ASSIGN = re.compile(r"^\s*[A-Za-z_]\w*(\s*=\s*[A-Za-z_]\w*)*\s*=\s*None\s*$")

KernelBuilder = Callable[[CNode, list[CNode]], tuple[str, EwIR | RowIR, str, dict]]


def _leaf(n: CNode) -> bool:
    return n.op in ("input", "param")


def _inputs(n: CNode) -> list[CNode]:
    out = [a for a in n.args if isinstance(a, CNode)]
    out += [a for a in n.attrs.values() if isinstance(a, CNode)]
    for v in n.attrs.values():
        if isinstance(v, (list, tuple)):
            out += [a for a in v if isinstance(a, CNode)]
    return out


def _ancestors(out: CNode) -> list[CNode]:
    seen: dict[int, CNode] = {}
    stack = [out]
    while stack:
        n = stack.pop()
        if id(n) not in seen:
            seen[id(n)] = n
            stack.extend(_inputs(n))
    return list(seen.values())


def _program_order(out: CNode, order: dict[str, int]) -> list[CNode]:
    """The non-leaf ancestors of ``out`` in the traced program's order: a composite's steps
    (named ``<call>_<op>``) at their call after their inputs, as is a convolution without bias
    before its bias add (both named after the module call)."""
    depth: dict[int, int] = {}  # found without recursion: networks run deep
    stack = [out]
    while stack:
        todo = [a for a in _inputs(stack[-1]) if id(a) not in depth]
        stack.extend(todo)
        if not todo:
            n = stack.pop()
            depth[id(n)] = 1 + max((depth[id(a)] for a in _inputs(n)), default=0)

    def key(n: CNode) -> tuple[int, int, bool]:
        base = n.name if n.name in order else n.name.removesuffix(f"_{n.op}")
        if base not in order:
            raise NoMatch(f"{n.name} ({n.op}) has no place in the traced program")
        return order[base], depth[id(n)], not n.attrs.get("nobias")

    return sorted((n for n in _ancestors(out) if not _leaf(n)), key=key)


def _is_library(n: CNode) -> bool:
    return n.op == "opaque" or n.op in GEMM_OPS


def _resolves(model: torch.nn.Module, path: str) -> bool:
    """Whether ModelNew (the reference's __init__) has ``path``: not a constant fx made while
    tracing (``torch.tensor(c)`` in forward becomes ``_tensor_constant0`` on the traced root)."""
    if path.split(".")[-1].startswith("_tensor_constant"):
        return False
    obj = model
    for part in path.split("."):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def _substitute(
    out: CNode, prefix: dict[int, CNode], model: torch.nn.Module
) -> tuple[CNode, dict[str, CNode]]:
    """A copy of the tail of ``out`` where each prefix node is an input named ``lib_<name>``."""
    memo: dict[int, CNode] = {}
    stops: dict[str, CNode] = {}

    def copy(v):
        if isinstance(v, CNode):
            return node(v)
        if isinstance(v, (list, tuple)):
            return type(v)(copy(x) for x in v)
        return v

    def node(n: CNode) -> CNode:
        if id(n) in memo:
            return memo[id(n)]
        if id(n) in prefix:
            if not isinstance(n.value, torch.Tensor) or n.value.dtype != torch.float32:
                raise NoMatch(f"the library result {n.name} is not a float32 tensor")
            name = LIBRARY_PREFIX + n.name
            stops[name] = n
            new = CNode("input", [], {"name": name}, n.value, name)
        elif _leaf(n):
            if n.op == "param" and not _resolves(model, n.attrs["path"]):
                raise NoMatch(f"{n.attrs['path']} is a tensor made inside forward")
            new = n
        else:
            new = CNode(n.op, [copy(a) for a in n.args], {}, n.value, n.name)
            new.attrs = {k: copy(v) for k, v in n.attrs.items()}
        memo[id(n)] = new
        return new

    return node(out), stops


def prefix_code(traced: Traced, stops: dict[str, CNode]) -> list[str]:
    """Forward lines computing each stop node as ``lib_<name>`` with the reference's own calls."""
    by_name = {n.name: n for n in traced.graph.graph.nodes}
    targets = [by_name[s.name] for s in stops.values()]
    need: set[fx.Node] = set()
    stack = list(targets)
    while stack:
        n = stack.pop()
        if n not in need:
            need.add(n)
            stack.extend(n.all_input_nodes)
    for n in need:
        if n.op == "get_attr" and not _resolves(traced.model, cast(str, n.target)):  # a path
            raise NoMatch(f"the library prefix reads {n.target}, a tensor made inside forward")
    _no_baked_attributes(traced, need)
    graph = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    for n in traced.graph.graph.nodes:
        if n in need:
            env[n] = graph.node_copy(n, lambda a: env[a])
            env[n].type = None  # annotations (x: torch.Tensor) would need their own globals
            if n.op != "placeholder":
                env[n]._rename(LIBRARY_PREFIX + n.name)
    for name, s in stops.items():
        if env[by_name[s.name]].name != name:
            raise NoMatch(f"the library result {s.name} cannot be named {name}")
    graph.output(tuple(env[t] for t in targets))
    code = graph.python_code(root_module="self")
    extra = set(code.globals) - _GLOBALS_OK
    if extra:
        raise NoMatch(f"the library prefix calls {sorted(extra)}, which a solution cannot import")
    lines = []
    for line in code.src.splitlines():
        text = line.strip()
        if not text or text.startswith(("def ", "return ")):
            continue
        # fx frees dead values (`x = None`); forward arguments may still be read by the kernel.
        parts = [p.strip() for p in text.split(";") if p.strip() and not _NONE_ASSIGN.match(p)]
        lines += parts
    lines = [_without_bias(line, stops) for line in lines]
    used = {w for line in lines for w in re.findall(r"\b[A-Za-z_]\w*\b", line)}
    if used & {"fx_pytree", "pytree", "device", "inf", "nan", "NoneType"}:
        raise NoMatch("the library prefix uses names a solution does not define")
    return lines


def _without_bias(line: str, stops: dict[str, CNode]) -> str:
    """``lib_conv = self.conv(x)`` as ``_conv_nobias(self.conv, x)`` where the kernel adds the
    convolution's bias (a ``nobias`` node of :func:`htam.offline.front.lower.bias_folds`)."""
    name = line.split(" = ", 1)[0]
    stop = stops.get(name)
    if stop is None or not stop.attrs.get("nobias"):
        return line
    module = "self." + stop.attrs["fx"].target
    call = f"{name} = {module}("
    if not line.startswith(call):  # fx prints module calls so: anything else is a bug here
        raise RuntimeError(f"unexpected prefix line for a convolution without bias: {line!r}")
    return f"{name} = _conv_nobias({module}, " + line[len(call) :]


def _no_baked_attributes(traced: Traced, nodes: set[fx.Node]) -> None:
    """fx inlines the traced instance's plain attributes (``self.heads`` becomes ``4``): a
    prefix whose call arguments hold a constructor value would compute wrongly for other init
    inputs, so it is refused (conservatively: any equal constant counts). Float attributes are
    exempt unless a constant was computed from them: the probe trace (front/attrs.py) put each
    one the graph holds back as ``self.<name>``, so an equal constant left is a literal."""
    kinds = (int,) if not traced.marks.derived else (int, float)
    scalars = {k: v for k, v in vars(traced.model).items() if type(v) in kinds}
    if not scalars:
        return
    constants: set = set()
    for n in nodes:
        if n.op in ("call_function", "call_method", "call_module"):
            fx.node.map_aggregate(
                (n.args, n.kwargs),
                lambda a: constants.add(a) if type(a) in (int, float) else None,
            )
    baked = sorted(f"{k}={v!r}" for k, v in scalars.items() if v in constants)
    if baked:
        raise NoMatch(f"the library prefix would bake in constructor values ({', '.join(baked)})")


def _library_names(prefix: list[CNode]) -> str:
    names = []
    for n in prefix:
        if any(isinstance(a, CNode) and a.attrs.get("nobias") for a in n.args):
            continue  # a convolution's own bias, back in its call
        if n.op == "opaque":
            fxn = n.attrs["fx"]
            target = fxn.target
            label = target if isinstance(target, str) else getattr(target, "__name__", str(target))
            names.append(label)
        else:
            names.append(n.op)
    return " -> ".join(names)


class LibraryMatch(NamedTuple):
    family: str
    ir: EwIR | RowIR  # the kernel tail
    summary: str
    features: dict
    prelude: list[str]  # forward lines computing the prefix with torch
    library: str  # what the prefix computes, for the summary
    # the prefix's matrix products of forward inputs and parameters, by the prelude line's name
    gemms: dict[str, GemmIR]
    layers: int  # the prefix's convolutions, matrix products and attentions (norms, pools apart)


def match_library(traced: Traced, build_kernel: KernelBuilder) -> LibraryMatch:
    """The library prefix + kernel tail of a traced reference.

    ``build_kernel(out, nodes)`` is the matcher's own family choice for a graph without library
    operations (elementwise or row); it raises NoMatch when the tail does not fit.
    """
    out = lower(traced, opaque=True)
    nodes = _program_order(out, {n.name: i for i, n in enumerate(traced.graph.graph.nodes)})
    lib = [i for i, n in enumerate(nodes) if _is_library(n)]
    if not any(_heavy(nodes[i]) for i in lib):
        raise NoMatch("no library operation (convolution, matrix product...) to keep in torch")
    prefix = _closure([nodes[i] for i in lib])
    last = NoMatch("nothing follows the library operations: no kernel would remain")
    while id(out) not in prefix:
        try:
            tail, stops = _substitute(out, prefix, traced.model)
            family, ir, summary, features = build_kernel(tail, _ancestors(tail))
            prelude = prefix_code(traced, stops)
        except NoMatch as err:
            last = err
            nxt = next(n for n in nodes if id(n) not in prefix)  # the tail moves to torch
            prefix |= _closure([nxt])
            continue
        held = [n for n in nodes if id(n) in prefix]
        gemms = _products(held, prelude)
        names = _library_names(held)
        return LibraryMatch(family, ir, summary, features, prelude, names, gemms, _layers(held))
    raise NoMatch(f"no chain after the library operations fits a kernel ({last})")


def _products(prefix: list[CNode], prelude: list[str]) -> dict[str, GemmIR]:
    """The prefix's matrix products (and their bias) of forward inputs and parameters, by the
    name of the prelude line computing each: a backend may compute them with its own kernel."""
    found = {}
    for n in prefix:
        name = LIBRARY_PREFIX + n.name
        if n.op in GEMM_OPS and any(line.startswith(f"{name} = ") for line in prelude):
            try:
                found[name] = match_gemm(n, n)
            except NoMatch:  # computed from other prefix results, or batched unlike the template
                continue
    return found


def _closure(roots: list[CNode]) -> dict[int, CNode]:
    """The roots and every operation they need (a library call's inputs are torch's too)."""
    return {id(n): n for r in roots for n in _ancestors(r) if not _leaf(n)}
