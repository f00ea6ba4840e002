"""Lower a traced fx graph to canonical nodes: one spelling per operation.

``torch.relu(x)``, ``F.relu(x)``, ``x.relu()``, ``x.relu_()`` and ``nn.ReLU()`` all become
``CNode("relu", [x])``, with default arguments filled in, so the matcher sees operations, not
spellings. Anything outside the tables raises :class:`NoMatch` naming the operation.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any, cast

import torch
import torch.fx as fx
import torch.nn.functional as F

from htam.offline.front.composite import COMPOSITE_FUNCTIONS, COMPOSITE_MODULES
from htam.offline.front.concrete import SizeFloat, SizeInt
from htam.offline.front.missing import family_note, not_one_tensor
from htam.offline.front.modules import lower_module
from htam.offline.front.specs import FUNCTION_NAMES, OPERATORS, SPECS
from htam.offline.front.trace import NoMatch, Traced

# Operations only a whole-task family reads (pooling, channel norms, scans and their pieces): a
# library prefix keeps them as torch calls (opaque), as it did before those families existed.
FAMILY_ONLY = frozenset(
    {
        "max_pool",
        "avg_pool",
        "conv",
        "batch_norm",
        "group_norm",
        "cumsum",
        "cumprod",
        "flip",
        "narrow",
        "select",
        "zeros_like",
        "cross_entropy",
        "kl_div",
        "triplet_margin_loss",
        "scaled_dot_product_attention",
        "sdpa",
        "triu",
        "tril",
        "pixel_shuffle",
        "pixel_unshuffle",
    }
)


@dataclass(eq=False)
class CNode:
    op: str  # canonical operation, e.g. "relu", "sum", "linear", "input", "param"
    args: list[Any]  # CNode inputs and float constants
    attrs: dict[str, Any] = field(default_factory=dict)
    value: Any = None  # what the reference produced here
    name: str = ""  # fx node name, for messages

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.value.shape)


@dataclass(frozen=True)
class ShapeVal:
    """Metadata read from a tensor (a size, its device or dtype): fine as structure (how many
    dims, where to allocate), but baked into arithmetic a size would freeze the traced size, so
    the builder refuses it there."""

    value: Any

    def __len__(self) -> int:
        return len(self.value)


def _function_key(target: Any) -> str | None:
    if target in FUNCTION_NAMES:
        return FUNCTION_NAMES[target]
    name = getattr(target, "__name__", "")
    owner = getattr(target, "__module__", "") or ""
    is_torch = target is getattr(torch, name, None) or target is getattr(F, name, None)
    if is_torch or owner.startswith("torch"):
        return name.rstrip("_") if name.rstrip("_") in SPECS else name
    return None


def _bind(node: fx.Node, names: list[str], defaults: dict[str, Any], skip: int = 1) -> dict:
    """Map positional and keyword arguments (after the input) to parameter names."""
    bound = dict(defaults)
    for name, value in zip(names, node.args[skip:], strict=False):
        bound[name] = value
    for key, value in node.kwargs.items():
        bound["dim" if key == "axis" else key] = value
    if node.target in ("view", "reshape", "permute") and len(node.args) > 2:
        bound[names[0]] = tuple(node.args[1:])  # x.view(a, b) spelling
    return bound


class Lowerer:
    """``opaque``: an operation outside the tables becomes ``CNode("opaque", inputs)`` (computed
    by torch in a library prefix, see :mod:`htam.offline.matcher.library`) instead of raising."""

    def __init__(self, traced: Traced, opaque: bool = False):
        self.traced = traced
        self.opaque = opaque
        self.env: dict[fx.Node, Any] = {}

    def run(self) -> CNode:
        for node in self.traced.graph.graph.nodes:
            if node.op == "output":
                out = self._arg(node.args[0])
                if not isinstance(out, CNode):
                    raise NoMatch(not_one_tensor(out))
                return out
            self.env[node] = self._lower(node)
        raise NoMatch("the traced graph has no output")

    def _arg(self, a: Any) -> Any:
        if isinstance(a, fx.Node):
            return self.env[a]
        if isinstance(a, SizeInt | SizeFloat):  # a size of the concrete-shape trace
            return ShapeVal(a)
        if isinstance(a, (list, tuple)):
            return type(a)(self._arg(x) for x in a)
        return a

    def _make(self, node: fx.Node, op: str, args: list, attrs: dict) -> CNode:
        value = self.traced.values.get(node)
        return CNode(op, args, attrs, value, node.name)

    def _lower(self, node: fx.Node) -> Any:
        if node.op == "placeholder":
            return self._make(node, "input", [], {"name": node.target})
        if node.op == "get_attr":
            return self._make(node, "param", [], {"path": node.target})
        if node.op == "call_module":
            target = cast(str, node.target)  # a module call's target: the module's path
            sub = self.traced.graph.get_submodule(target)
            if self.opaque and len(node.args) == 1 and not node.kwargs and bias_folds(sub, target):
                return self._conv_bias(node, sub)
            try:
                if type(sub) in COMPOSITE_MODULES:
                    return COMPOSITE_MODULES[type(sub)](self, node, sub)
                op, attrs, params = lower_module(sub, target)
            except NoMatch:
                if self.opaque:
                    return self._opaque(node)
                raise
            if self.opaque and op in FAMILY_ONLY:  # torch's in a library prefix, as before
                return self._opaque(node)
            if op == "conv" and (len(node.args) > 1 or node.kwargs):  # e.g. an output_size
                raise NoMatch(f"{type(sub).__name__} called with more than its input ({target})")
            args = [self._arg(a) for a in node.args[: 3 if op == "triplet_margin_loss" else 1]]
            for attr, path in params.items():
                attrs[attr] = (
                    None
                    if path is None
                    else CNode("param", [], {"path": path}, self.traced.model.get_parameter(path))
                )
            return self._make(node, op, args, attrs)
        if node.target in (operator.getitem, getattr):
            return self._select(node)
        if node.op == "call_method" and node.target in ("size", "dim"):
            return ShapeVal(self.traced.values.get(node))
        key: str | None
        if node.op == "call_method":
            method = cast(str, node.target)  # a method call's target: the method's name
            key = method.rstrip("_") if method.rstrip("_") in SPECS else method
        elif node.target in OPERATORS:
            key = OPERATORS[node.target]
        else:
            key = _function_key(node.target)
        if self.opaque and key in FAMILY_ONLY:
            return self._opaque(node)
        if key in COMPOSITE_FUNCTIONS:
            try:
                return COMPOSITE_FUNCTIONS[key](self, node)
            except NoMatch:
                if self.opaque:
                    return self._opaque(node)
                raise
        if key not in SPECS:
            if self.opaque:
                return self._opaque(node)
            raise NoMatch(
                f"unsupported operation {_describe(node)}{family_note(str(key or _describe(node)))}"
            )
        op, names, defaults = SPECS[key]
        bound = {k: self._arg(v) for k, v in _bind(node, names, defaults).items()}
        first = self._arg(node.args[0]) if node.args else bound.pop("input", None)
        if isinstance(first, ShapeVal) or not isinstance(first, CNode | float | int):
            # Arithmetic on sizes (x.dim() - 1) stays metadata; never a tensor op.
            return ShapeVal(self.traced.values.get(node))
        if op in ("max", "min"):
            op = _max_min(op, bound)
        return self._make(node, op, [first], bound)

    def _select(self, node: fx.Node) -> Any:
        base = self._arg(node.args[0])
        key = node.args[1]
        if isinstance(base, ShapeVal) or (
            node.target is getattr and key in ("shape", "ndim", "device", "dtype")
        ):
            return ShapeVal(self.traced.values.get(node))
        if isinstance(base, CNode) and base.op in ("max", "min") and "dim_pair" in base.attrs:
            pick = {0: 0, 1: 1, "values": 0, "indices": 1}.get(key)
            if pick is None:
                raise NoMatch(f"unsupported selection {key!r} of {base.op}(dim=...)")
            return self._split(node, base, pick)
        if isinstance(base, CNode) and node.target is getattr and key in ("T", "mT"):
            return self._make(node, "transpose", [base], {"dim0": -2, "dim1": -1})
        if self.opaque and isinstance(self.traced.values.get(node), torch.Tensor):
            return self._opaque(node)
        raise NoMatch(f"unsupported indexing or attribute access {_describe(node)}")

    def synth(self, node: fx.Node, op: str, args: list, attrs: dict, shape) -> CNode:
        """A canonical node between ``node``'s inputs and its result (a composite's step):
        its value a meta tensor of ``shape``; the result itself takes ``node``'s value."""
        value = torch.empty(tuple(shape), dtype=torch.float32, device="meta")
        return CNode(op, args, attrs, value, f"{node.name}_{op}")

    def _opaque(self, node: fx.Node) -> CNode:
        """An operation the templates do not know: its tensor inputs are its arguments."""
        inputs = [self.env[a] for a in node.all_input_nodes if isinstance(self.env[a], CNode)]
        return self._make(node, "opaque", inputs, {"fx": node})

    def _conv_bias(self, node: fx.Node, conv: torch.nn.Module) -> CNode:
        """A convolution module with a bias, as the convolution without it (``nobias``) plus the
        bias: torch adds a convolution's bias in a pass of its own over the result (a read and a
        write of the largest tensor), which the kernel's chain absorbs. When the add stays in
        the library prefix, the prefix prints the module's own call (both nodes carry its name).
        """
        conv = cast(torch.nn.modules.conv._ConvNd, conv)  # bias_folds: a plain convolution
        conv_node = self._opaque(node)
        conv_node.attrs["nobias"] = True
        bias = self.channel_param(
            node, "bias", cast(torch.Tensor, conv.bias), len(conv.kernel_size)
        )
        return self._make(node, "add", [conv_node], {"other": bias, "alpha": 1})

    def channel_param(self, node: fx.Node, name: str, tensor: torch.Tensor, spatial: int) -> CNode:
        """``<node's module>.<name>`` as a parameter node seen as ``(C, 1, ...)``: a channel of
        the result, ``spatial`` dims after it."""
        value = tensor.view(-1, *[1] * spatial)
        return CNode("param", [], {"path": f"{node.target}.{name}"}, value, f"{node.name}_{name}")

    def _split(self, node: fx.Node, base: CNode, pick: int) -> CNode:
        op = ("amax", "argmax") if base.op == "max" else ("amin", "argmin")
        return self._make(node, op[pick], base.args, dict(base.attrs))


_PLAIN_CONVS = (
    torch.nn.Conv1d,
    torch.nn.Conv2d,
    torch.nn.Conv3d,
    torch.nn.ConvTranspose1d,
    torch.nn.ConvTranspose2d,
    torch.nn.ConvTranspose3d,
)


def bias_folds(module: torch.nn.Module, target: str) -> bool:
    """Whether a library prefix may run this module's convolution without its bias (a plain
    torch convolution class without hooks, zero padding, a bias, a path the forward can spell
    ``self.a.b``; the caller checks that the call passes the input alone)."""
    return (
        type(module) in _PLAIN_CONVS
        and module.bias is not None
        and module.padding_mode == "zeros"
        and not (module._forward_hooks or module._forward_pre_hooks)
        and all(part.isidentifier() for part in target.split("."))
    )


def _describe(node: fx.Node) -> str:
    target = (
        node.target
        if isinstance(node.target, str)
        else getattr(node.target, "__name__", repr(node.target))
    )
    return f"{node.op} {target!r} ({node.name})"


def _max_min(op: str, bound: dict) -> str:
    """torch.max has three meanings: of everything, along a dim (a pair), or of two tensors."""
    dim = bound.get("dim")
    if isinstance(dim, CNode):
        bound["other"] = bound.pop("dim")
        return "maximum" if op == "max" else "minimum"
    if dim is None:
        bound["dim"] = ()
        return "amax" if op == "max" else "amin"
    bound["dim_pair"] = True  # split into values/indices by the getitem or getattr users
    return op


def lower(traced: Traced, opaque: bool = False) -> CNode:
    return Lowerer(traced, opaque).run()
