"""Decide which template family a task fits, or say plainly why none does."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, cast

import torch

from htam.offline.front.initsrc import copy_init
from htam.offline.front.lower import CNode
from htam.offline.front.trace import NoMatch, Traced
from htam.offline.ir.model import (
    EwIR,
    Match,
    RowIR,
)
from htam.offline.ir.passes import row_features
from htam.offline.ir.views import per_channel
from htam.offline.matcher.build import ATTR_PREFIX, GEMM_OPS, ROW_OPS, Builder, bind_device
from htam.offline.matcher.channel_norm import NORM_OPS, match_channel_norm
from htam.offline.matcher.conv import CONV_OPS, match_conv
from htam.offline.matcher.gemm import match_gemm
from htam.offline.matcher.permute import is_permutation, match_permute
from htam.offline.matcher.pool import POOL_OPS, match_pool
from htam.offline.matcher.rows import reduced_dims, row_spec
from htam.offline.matcher.rows_permuted import permute_operands, permuted_rows
from htam.offline.matcher.scan import SCAN_OPS, match_scan
from htam.offline.matcher.special import SPECIAL_OPS, match_special

# Functions a channels-last prefix must not hold: a functional convolution (no module weight to
# convert), pooling, norms other than batch norm, resampling.
_CL_SLOW = re.compile(r"conv|pool|group_norm|layer_norm|instance_norm|interpolate|upsample")
_ACTIVATIONS = tuple(
    cls
    for cls in vars(torch.nn.modules.activation).values()
    if isinstance(cls, type)
    and cls.__module__ == "torch.nn.modules.activation"
    and cls.__name__ not in ("MultiheadAttention", "Softmax", "Softmin", "LogSoftmax", "Softmax2d")
)


def _reachable(out: CNode) -> list[CNode]:
    seen: dict[int, CNode] = {}
    stack = [out]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen[id(n)] = n
        stack.extend(a for a in n.args if isinstance(a, CNode))
        stack.extend(a for a in n.attrs.values() if isinstance(a, CNode))
    return list(seen.values())


def _primary(builder: Builder, shape: tuple[int, ...], what: str) -> str:
    full = [op.name for op in builder.operands.values() if op.pattern == "full"]
    if not full:
        raise NoMatch(
            f"no input or parameter has the {what} shape {list(shape)}; "
            "sizes could not be read at run time"
        )
    return full[0]


def _elementwise(out: CNode) -> tuple[EwIR, str]:
    builder = Builder(out.shape)
    prog = builder.build(out)
    if not prog.ops:
        raise NoMatch(
            "the reference computes nothing from its inputs (it returns an input or a constant)"
        )
    primary = _primary(builder, out.shape, "output")
    operands = bind_device(list(builder.operands.values()), primary)
    return EwIR(prog, operands, primary, len(out.shape)), prog.describe()


def _row(out: CNode, first: CNode) -> tuple[RowIR, str]:
    dims = reduced_dims(first)
    if dims and list(dims) != list(range(dims[0], dims[-1] + 1)):
        out, first, perm, keep = permuted_rows(out, first)
        ir, summary = _row(out, first)
        ir = permute_operands(replace(ir, keepdim=keep), perm)
        return ir, f"{summary} permuted by {list(perm)}"
    spec = row_spec(first)
    builder = Builder(spec.shape, rows=spec)
    prog = builder.build(out)
    primary = _primary(builder, spec.shape, "reduced tensor's")
    out_kind = builder.kind(prog.out)
    if out_kind == "elem" and out.shape != spec.shape:
        raise NoMatch(f"the output {list(out.shape)} is neither the input shape nor per-row")
    if out_kind == "row" and out.shape not in (spec.keep_shape, spec.squeezed_shape):
        raise NoMatch(
            f"the per-row output has shape {list(out.shape)}; expected "
            f"{list(spec.keep_shape)} or {list(spec.squeezed_shape)}"
        )
    if out_kind == "const" or not isinstance(prog.out, int):
        raise NoMatch("the output is not computed from the reduced rows")
    dtype = "int64" if out.value.dtype == torch.int64 else "float32"
    keep = out_kind == "row" and out.shape == spec.keep_shape and len(out.shape) == len(spec.shape)
    ir = RowIR(
        prog,
        bind_device(list(builder.operands.values()), primary),
        primary,
        len(spec.shape),
        spec.d0,
        spec.d1,
        out_kind,
        keep,
        dtype,
    )
    block = list(range(spec.d0, spec.d1 + 1))
    return ir, f"{prog.describe()} over dims {block} of {list(spec.shape)}"


def match_library_prefix(traced: Traced, source: str, err: NoMatch) -> Match:
    """The library path (htam.offline.matcher.library): torch computes the convolution / GEMM prefix,
    one kernel the chain after it. Its reason is added to the first one when it fails too."""
    from htam.offline.matcher.library import match_library

    try:
        if traced.concrete:
            raise NoMatch(
                "traced with concrete input sizes (Python code reads them), which a printed "
                "prefix would freeze"
            )
        lib = match_library(traced, _kernel)
    except NoMatch as lib_err:
        raise NoMatch(f"{err}; as library call + kernel: {lib_err}") from err
    preamble, init = copy_init(source)
    scalars, buffers = _scalars(traced, lib.ir)
    features, conv_inputs = lib.features, cast(tuple[str, ...], ())
    if _channels_last_fits(traced, lib.ir) and (
        lib.family == "elementwise" or _channel_rows(cast(RowIR, lib.ir))  # not elementwise: rows
    ):
        features = {**features, "channels_last": True}
        conv_inputs = _conv_inputs(traced, lib.ir)
    return Match(
        lib.family,
        f"library [{lib.library}] + {lib.summary}",
        [n.target for n in traced.graph.graph.nodes if n.op == "placeholder"],
        lib.ir,
        init_source=init,
        preamble=preamble,
        features=features,
        scalars=scalars,
        attr_buffers=buffers,
        prelude=lib.prelude,
        library=lib.library,
        layers=lib.layers,
        conv_inputs=conv_inputs,
        prefix_gemms=lib.gemms,
    )


def _scalars(traced: Traced, ir) -> tuple[dict[str, float], tuple[str, ...]]:
    """(the float attributes the solution is specialized to, checked in ``__init__``; the
    attributes the kernel reads from a buffer). An attribute read at run time wherever the
    reference uses it needs no check (front/attrs.py)."""
    scalars = {k: v for k, v in vars(traced.model).items() if type(v) is float}
    free = traced.marks.free(scalars)
    operands = getattr(ir, "operands", [])
    buffers = tuple(
        sorted(op.name[len(ATTR_PREFIX) :] for op in operands if op.name.startswith(ATTR_PREFIX))
    )
    return {k: v for k, v in scalars.items() if k not in free}, buffers


def _channel_rows(ir: RowIR) -> bool:
    """A reduction over the channel dim alone of the library result, to one value per row, with
    no other tensor read but scalars and per-channel values (a convolution's bias): channels-last,
    its rows are contiguous, and a per-channel value is laid along them."""
    others = [op for op in ir.operands if op.name != ir.primary]
    primary = next(op for op in ir.operands if op.name == ir.primary)
    return (
        ir.d0 == ir.d1 == 1
        and ir.out_kind == "row"
        and primary.library_result
        and all(op.pattern == "scalar" or per_channel(op, ir.rank) for op in others)
    )


def _channels_last_fits(traced: Traced, ir: EwIR | RowIR) -> bool:
    """Whether the prefix's convolutions may run channels-last for the kernel to read: every
    convolution a module of the model (its weight converted once, in ``__init__``), no other
    library operation but batch norm (pooling and group or layer norms ran slower channels-last
    on the H200: KernelBench level 2 tasks 3, 50, 60, 85), and the kernel's output 4-d or 5-d,
    read from a library result of that shape."""
    nodes = list(traced.graph.graph.nodes)
    modules = {n: traced.model.get_submodule(n.target) for n in nodes if n.op == "call_module"}
    convs = [n for n, m in modules.items() if isinstance(m, torch.nn.modules.conv._ConvNd)]
    elementwise = (torch.nn.modules.batchnorm._BatchNorm, *_ACTIVATIONS)
    others = [m for n, m in modules.items() if n not in convs and not isinstance(m, elementwise)]
    functions = [n for n in nodes if n.op in ("call_function", "call_method")]
    slow = [n for n in functions if _CL_SLOW.search(getattr(n.target, "__name__", str(n.target)))]
    read = any(op.library_result for op in ir.operands)
    return bool(convs) and not others and not slow and ir.rank in (4, 5) and read


def _conv_inputs(traced: Traced, ir: EwIR | RowIR) -> tuple[str, ...]:
    """Forward inputs a module convolution reads directly, 4-d or 5-d, that the kernel does not
    read: the forward may hand them to the convolution in channels-last memory."""
    read = {op.source for op in ir.operands}  # an input's source is its name, at any pattern
    names = []
    for n in traced.graph.graph.nodes:
        if n.op != "call_module" or not n.args or not isinstance(n.args[0], torch.fx.Node):
            continue
        x = n.args[0]
        conv = isinstance(traced.model.get_submodule(n.target), torch.nn.modules.conv._ConvNd)
        value = traced.values.get(x)
        tensor = isinstance(value, torch.Tensor) and value.dim() in (4, 5)
        if conv and tensor and x.op == "placeholder" and x.target not in read:
            names.append(cast(str, x.target))  # a placeholder's target: its name
    return tuple(dict.fromkeys(names))


def _kernel(out: CNode, nodes: list[CNode]) -> tuple[str, EwIR | RowIR, str, dict]:
    """(family, ir, summary, features) of a graph without matrix products."""
    rows = [n for n in nodes if n.op in ROW_OPS]
    ir: EwIR | RowIR
    if any(n.op in GEMM_OPS for n in nodes):
        raise NoMatch("a matrix product inside the chain")
    if rows:
        ir, summary = _row(out, min(rows, key=lambda n: n.name))
        return "row", ir, summary, row_features(ir)
    ir, summary = _elementwise(out)
    return "elementwise", ir, summary, {}


def match_families(out: CNode, traced: Traced, source: str) -> Match:
    """The family the lowered graph ``out`` fits (NoMatch says why none does)."""
    nodes = _reachable(out)
    inputs = [n.target for n in traced.graph.graph.nodes if n.op == "placeholder"]
    gemms = [n for n in nodes if n.op in GEMM_OPS]
    rows = [n for n in nodes if n.op in ROW_OPS]
    if len(gemms) > 1:
        raise NoMatch(f"{len(gemms)} matrix products; the GEMM template covers one")
    if gemms and rows:
        raise NoMatch(
            f"a matrix product combined with the row operation {rows[0].op}; "
            "GEMM epilogues must be elementwise"
        )
    features: dict[str, bool] = {}
    pools = [n for n in nodes if n.op in POOL_OPS]
    convs = [n for n in nodes if n.op in CONV_OPS]
    norms = [n for n in nodes if n.op in NORM_OPS]
    scans = [n for n in nodes if n.op in SCAN_OPS]
    if scans and (gemms or rows):
        raise NoMatch(
            f"a {scans[0].op} combined with a {'matrix product' if gemms else 'reduction'}; "
            "the scan family scans an elementwise chain"
        )
    ir: Any
    if any(n.op in SPECIAL_OPS for n in nodes):
        family, ir, summary = match_special(out, nodes)
    elif is_permutation(out):
        ir, summary = match_permute(out)
        family = "permute"
    elif convs:
        ir, summary = match_conv(out, convs, traced.model)
        family = "conv"
    elif norms:
        ir, summary = match_channel_norm(out, norms)
        family = "channel_norm"
    elif pools:
        ir, summary = match_pool(out, pools)
        family = "pool"
    elif scans:
        ir, summary = match_scan(out, scans)
        family = "scan"
    elif gemms:
        ir = match_gemm(gemms[0], out)
        family = "gemm"
        summary = f"{gemms[0].op} + epilogue [{ir.epilogue.describe()}]"
    elif rows:
        first = min(rows, key=lambda n: n.name)
        ir, summary = _row(out, first)
        family = "row"
        features = row_features(ir)
    else:
        ir, summary = _elementwise(out)
        family = "elementwise"
    preamble, init = copy_init(source)
    scalars, buffers = _scalars(traced, ir)
    return Match(
        family,
        summary,
        inputs,
        ir,
        init_source=init,
        preamble=preamble,
        features=features,
        scalars=scalars,
        attr_buffers=buffers,
    )
