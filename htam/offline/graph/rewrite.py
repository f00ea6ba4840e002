"""The reference's source, rewritten so that its fusible segments run in kernels of our own.

The model's classes and the module-level definitions they use are copied (``Model`` renamed
``ModelNew``); library calls (convolutions, matrix products, pooling, recurrent layers) stay as
written, and each segment a template covers is pointed at a kernel-backed equivalent of
:mod:`.runtime`: ``nn.ReLU(...)`` becomes ``_KReLU(...)`` (a subclass, same constructor),
``F.relu(x)`` becomes ``_f_relu(x)``, ``F.relu(self.fc(x))`` becomes ``_relu_after(self.fc, x)``
(the bias and the activation in one kernel after the library product), ``nn.Sequential`` becomes
``_KSeq`` (each library call or batch norm fused with the activation after it). The forward's
code is otherwise the reference's, so constructor values stay attributes read at run time.
"""

from __future__ import annotations

import ast
from collections import Counter
from dataclasses import dataclass

from htam.offline.front.initsrc import _helpers, _imports, _Rename, _used
from htam.offline.front.trace import NoMatch

# torch module -> (kernel-backed subclass, the family it stands for)
MODULES = {
    "ReLU": "activation",
    "ReLU6": "activation",
    "Hardtanh": "activation",
    "Sigmoid": "activation",
    "Tanh": "activation",
    "GELU": "activation",
    "SiLU": "activation",
    "LeakyReLU": "activation",
    "BatchNorm1d": "batch norm",
    "BatchNorm2d": "batch norm",
    "BatchNorm3d": "batch norm",
    "LayerNorm": "layer norm",
    "Softmax": "softmax",
    "LogSoftmax": "softmax",
    "LSTM": "recurrent cell",
    "GRU": "recurrent cell",
}
# function -> (runtime function, keyword arguments it takes, positional arguments at most)
_F = {
    "relu": ("_f_relu", {"inplace"}, 2, "activation"),
    "relu6": ("_f_relu6", {"inplace"}, 2, "activation"),
    "sigmoid": ("_f_sigmoid", set(), 1, "activation"),
    "tanh": ("_f_tanh", set(), 1, "activation"),
    "gelu": ("_f_gelu", {"approximate"}, 1, "activation"),
    "silu": ("_f_silu", {"inplace"}, 2, "activation"),
    "leaky_relu": ("_f_leaky_relu", {"negative_slope", "inplace"}, 3, "activation"),
    "hardtanh": ("_f_hardtanh", {"min_val", "max_val", "inplace"}, 4, "activation"),
    "exp": ("_f_exp", set(), 1, "elementwise"),
    "softmax": ("_f_softmax", {"dim"}, 2, "softmax"),
    "log_softmax": ("_f_log_softmax", {"dim"}, 2, "softmax"),
}
_F_ROOTS = ("F.", "torch.nn.functional.", "nn.functional.", "torch.")
_TORCH_ONLY = {"relu", "sigmoid", "tanh", "exp", "softmax", "log_softmax"}  # torch.<name> spellings
_SEQUENTIAL = ("nn.Sequential", "torch.nn.Sequential")
# tensor method -> (runtime function, keyword arguments it takes, positional arguments at most):
# ``s.softmax(-1)`` becomes ``_f_softmax(s, -1)``
_METHODS = {
    "relu": ("_f_relu", set(), 0, "activation"),
    "sigmoid": ("_f_sigmoid", set(), 0, "activation"),
    "tanh": ("_f_tanh", set(), 0, "activation"),
    "exp": ("_f_exp", set(), 0, "elementwise"),
    "softmax": ("_f_softmax", {"dim"}, 1, "softmax"),
    "log_softmax": ("_f_log_softmax", {"dim"}, 1, "softmax"),
}
# receivers that are no tensor: the model itself (``self.softmax(x)`` is its own submodule) and
# the modules a source imports (``F.softmax(x, dtype=...)``, which ``_function`` refused)
_NOT_TENSORS = {"self", "F", "torch", "nn", "functional", "math", "np", "numpy"}


@dataclass
class Rewritten:
    source: str  # module-level helpers and ``class ModelNew`` (imports apart)
    imports: str  # the reference's import lines
    sites: Counter  # family -> number of rewritten sites
    forward_args: list[str]


def _function(call: ast.Call) -> tuple[str, str] | None:
    """(runtime function, family) when ``call`` is a functional op the runtime covers with
    arguments it takes; None otherwise."""
    text = ast.unparse(call.func)
    root = next((r for r in _F_ROOTS if text.startswith(r)), None)
    if root is None:
        return None
    name = text[len(root) :]
    if name not in _F or (root == "torch." and name not in _TORCH_ONLY):
        return None
    fn, kwargs, most, family = _F[name]
    if len(call.args) > most or any(k.arg not in kwargs for k in call.keywords):
        return None
    return fn, family


def _method(call: ast.Call) -> tuple[ast.expr, str, str] | None:
    """(receiver, runtime function, family) when ``call`` is a tensor method the runtime covers
    (``x.softmax(-1)``, ``y.relu()``) with arguments it takes; None otherwise."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in _METHODS:
        return None
    root = func.value
    while isinstance(root, ast.Attribute):
        root = root.value
    if isinstance(root, ast.Name) and (
        root.id in _NOT_TENSORS - {"self"} or func.value is root and root.id == "self"
    ):
        return None
    fn, kwargs, most, family = _METHODS[func.attr]
    if len(call.args) > most or any(k.arg not in kwargs for k in call.keywords):
        return None
    if any(isinstance(a, ast.Starred) for a in call.args):
        return None
    return func.value, fn, family


def _self_call(node: ast.AST) -> ast.Call | None:
    """``self.<name>(x)``: one positional argument, no keywords."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "self"
        and len(node.args) == 1
        and not node.keywords
        and not isinstance(node.args[0], ast.Starred)
    ):
        return node
    return None


# Only where nothing else is covered: a convolution's or linear layer's bias added by a kernel
# after the library call, so that a model of convolutions and linear layers alone (around an
# embedding, a pooling, data movement) still runs a kernel of ours; elsewhere they are left as
# written.
CONVS = {"Conv1d": "convolution + bias", "Conv2d": "convolution + bias",
         "Conv3d": "convolution + bias", "Linear": "linear + bias"}  # fmt: skip
# the position of the constructor's ``bias`` argument
_BIAS_AT = {"Conv1d": 7, "Conv2d": 7, "Conv3d": 7, "Linear": 2}


def _no_bias(call: ast.Call) -> bool:
    """Whether the layer may be built without a bias (``bias=False``, or a value known only at
    run time): then no kernel of ours would run, and it is left as written."""
    if len(call.args) > _BIAS_AT.get(ast.unparse(call.func).split(".")[-1], 7):
        return True  # bias given by position
    return any(
        k.arg == "bias" and not (isinstance(k.value, ast.Constant) and k.value.value is True)
        for k in call.keywords
    )


class _Swap(ast.NodeTransformer):
    """Module classes and functional calls pointed at the runtime's kernel-backed ones."""

    def __init__(self, modules: dict[str, str]) -> None:
        self.modules = modules
        self.sites: Counter = Counter()

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        text = ast.unparse(node)
        if isinstance(node.ctx, ast.Load):
            if text in _SEQUENTIAL:
                return ast.copy_location(ast.Name("_KSeq", ast.Load()), node)
            for root in ("nn.", "torch.nn."):
                name = text[len(root) :]
                if text.startswith(root) and name in self.modules:
                    self.sites[self.modules[name]] += 1
                    return ast.copy_location(ast.Name("_K" + name, ast.Load()), node)
        return self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if _no_bias(node) and ast.unparse(node.func).split(".")[-1] in CONVS:
            node.args = [self.visit(a) for a in node.args]  # its func left as written: no
            node.keywords = [self.visit(k) for k in node.keywords]  # bias, the library alone
            return node
        found = _function(node)
        method = None if found is not None else _method(node)
        if method is not None:
            receiver, fn, family = method
            self.sites[family] += 1
            args = [self.visit(receiver), *(self.visit(a) for a in node.args)]
            keywords = [self.visit(k) for k in node.keywords]
            return ast.copy_location(ast.Call(ast.Name(fn, ast.Load()), args, keywords), node)
        if found is None:
            return self.generic_visit(node)
        fn, family = found
        inner = _self_call(node.args[0]) if node.args else None
        if fn == "_f_relu" and inner is not None and len(node.args) == 1:
            # the library call's bias and the activation in one kernel
            self.sites["library call + activation"] += 1
            inner_arg = self.visit(inner.args[0])
            call = ast.Call(ast.Name("_relu_after", ast.Load()), [inner.func, inner_arg], [])
            return ast.copy_location(call, node)
        self.sites[family] += 1
        visited = self.generic_visit(node)
        assert isinstance(visited, ast.Call)  # a call's visit returns the call
        visited.func = ast.copy_location(ast.Name(fn, ast.Load()), visited.func)
        return visited


def _forward_args(model: ast.ClassDef) -> list[str]:
    fwd = next(
        (s for s in model.body if isinstance(s, ast.FunctionDef) and s.name == "forward"), None
    )
    if fwd is None:
        raise NoMatch("the task's Model defines no forward")
    if fwd.args.vararg or fwd.args.kwarg or fwd.args.kwonlyargs:
        raise NoMatch("the reference's forward takes *args, **kwargs or keyword-only arguments")
    return [a.arg for a in fwd.args.args[1:]]


def rewrite(source: str) -> Rewritten:
    """The model's classes with every covered segment pointed at the runtime (NoMatch when
    none is: the message names the modules it found instead)."""
    tree = ast.parse(source)
    model = next((s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == "Model"), None)
    if model is None:
        raise NoMatch("the task defines no class Model")
    args = _forward_args(model)
    helpers = _helpers(tree, _used(model))
    source, sites = _swapped(helpers, model, MODULES)
    if not sites:
        source, sites = _swapped(helpers, model, CONVS)
    if not sites:
        raise NoMatch(
            "no segment of the model is an activation, batch norm, layer norm, softmax, "
            "recurrent layer, biased convolution or biased linear layer "
            f"(it calls: {', '.join(sorted(_module_names(model))) or 'nothing'})"
        )
    return Rewritten(source, _imports(tree), sites, args)


def _swapped(helpers: list[str], model: ast.ClassDef, modules: dict) -> tuple[str, Counter]:
    swap = _Swap(modules)
    parts = []
    for text in [*helpers, ast.unparse(model)]:
        node = ast.parse(text)
        node = _Rename().visit(node)
        for stmt in node.body:
            if isinstance(stmt, ast.ClassDef) and stmt.name == "Model":
                stmt.name = "ModelNew"
        node = swap.visit(node)
        parts.append(ast.unparse(ast.fix_missing_locations(node)))
    return "\n\n\n".join(parts), swap.sites


def _module_names(model: ast.ClassDef) -> set[str]:
    """The torch modules and functions the model calls (for the refusal's message)."""
    names = set()
    for node in ast.walk(model):
        if isinstance(node, ast.Call):
            text = ast.unparse(node.func)
            if text.startswith(("nn.", "F.", "torch.")):
                names.add(text)
    return names
