"""Argument tables of the operations the lowering knows, by function or method name."""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.nn.functional as F

# (canonical op, parameter names after the input, defaults). Functions and method names share it.
UNARY = [  # ops that take only the input
    "relu",
    "sigmoid",
    "tanh",
    "exp",
    "log",
    "abs",
    "neg",
    "sqrt",
    "rsqrt",
    "square",
    "reciprocal",
    "silu",
    "mish",
    "hardsigmoid",
    "hardswish",
    "softsign",
    "logsigmoid",
    "selu",
    "sin",
    "cos",
    "erf",
    "log1p",
    "expm1",
    "exp2",
]
SPECS: dict[str, tuple[str, list[str], dict[str, Any]]] = {n: (n, [], {}) for n in UNARY}
SPECS.update(
    {
        "relu6": ("hardtanh", [], {"min_val": 0.0, "max_val": 6.0}),
        "log_sigmoid": ("logsigmoid", [], {}),
        "gelu": ("gelu", ["approximate"], {"approximate": "none"}),
        "leaky_relu": ("leaky_relu", ["negative_slope"], {"negative_slope": 0.01}),
        "elu": ("elu", ["alpha"], {"alpha": 1.0}),
        "celu": ("elu", ["alpha"], {"alpha": 1.0}),  # celu(x, a) == elu(x, a) for a > 0 only
        "hardtanh": ("hardtanh", ["min_val", "max_val"], {"min_val": -1.0, "max_val": 1.0}),
        "clamp": ("clamp", ["min", "max"], {"min": None, "max": None}),
        "clip": ("clamp", ["min", "max"], {"min": None, "max": None}),
        "clamp_min": ("clamp", ["min"], {"max": None}),
        "clamp_max": ("clamp", ["max"], {"min": None}),
        "softplus": ("softplus", ["beta", "threshold"], {"beta": 1.0, "threshold": 20.0}),
        "add": ("add", ["other", "alpha"], {"alpha": 1}),
        "sub": ("sub", ["other", "alpha"], {"alpha": 1}),
        "subtract": ("sub", ["other", "alpha"], {"alpha": 1}),
        "rsub": ("rsub", ["other", "alpha"], {"alpha": 1}),
        "mul": ("mul", ["other"], {}),
        "multiply": ("mul", ["other"], {}),
        "div": ("div", ["other", "rounding_mode"], {"rounding_mode": None}),
        "divide": ("div", ["other", "rounding_mode"], {"rounding_mode": None}),
        "true_divide": ("div", ["other"], {}),
        "maximum": ("maximum", ["other"], {}),
        "minimum": ("minimum", ["other"], {}),
        "pow": ("pow", ["exponent"], {}),
        "sum": ("sum", ["dim", "keepdim", "dtype"], {"dim": None, "keepdim": False, "dtype": None}),
        "mean": (
            "mean",
            ["dim", "keepdim", "dtype"],
            {"dim": None, "keepdim": False, "dtype": None},
        ),
        "amax": ("amax", ["dim", "keepdim"], {"dim": (), "keepdim": False}),
        "amin": ("amin", ["dim", "keepdim"], {"dim": (), "keepdim": False}),
        "max": ("max", ["dim", "keepdim"], {"dim": None, "keepdim": False}),
        "min": ("min", ["dim", "keepdim"], {"dim": None, "keepdim": False}),
        "argmax": ("argmax", ["dim", "keepdim"], {"dim": None, "keepdim": False}),
        "argmin": ("argmin", ["dim", "keepdim"], {"dim": None, "keepdim": False}),
        "logsumexp": ("logsumexp", ["dim", "keepdim"], {"keepdim": False}),
        "var": (
            "var",
            ["dim", "unbiased", "keepdim"],
            {"dim": None, "unbiased": True, "keepdim": False},
        ),
        "std": (
            "std",
            ["dim", "unbiased", "keepdim"],
            {"dim": None, "unbiased": True, "keepdim": False},
        ),
        "norm": ("norm", ["p", "dim", "keepdim"], {"p": "fro", "dim": None, "keepdim": False}),
        "vector_norm": (
            "norm",
            ["ord", "dim", "keepdim"],
            {"ord": 2, "dim": None, "keepdim": False},
        ),
        "softmax": ("softmax", ["dim", "_stacklevel", "dtype"], {"dim": None}),
        "log_softmax": ("log_softmax", ["dim", "_stacklevel", "dtype"], {"dim": None}),
        "layer_norm": (
            "layer_norm",
            ["normalized_shape", "weight", "bias", "eps"],
            {"weight": None, "bias": None, "eps": 1e-5},
        ),
        "rms_norm": (
            "rms_norm",
            ["normalized_shape", "weight", "eps"],
            {"weight": None, "eps": None},
        ),
        "normalize": ("normalize", ["p", "dim", "eps"], {"p": 2.0, "dim": 1, "eps": 1e-12}),
        "linear": ("linear", ["weight", "bias"], {"bias": None}),
        "matmul": ("matmul", ["other"], {}),
        "mm": ("matmul", ["other"], {}),
        "bmm": ("matmul", ["other"], {}),
        "addmm": ("addmm", ["mat1", "mat2", "beta", "alpha"], {"beta": 1, "alpha": 1}),
        "cumsum": ("cumsum", ["dim", "dtype"], {"dtype": None}),
        "cumprod": ("cumprod", ["dim", "dtype"], {"dtype": None}),
        "flip": ("flip", ["dims"], {}),
        # pieces of an exclusive scan (front/composite.py), refused anywhere else
        "narrow": ("narrow", ["dim", "start", "length"], {}),
        "select": ("select", ["dim", "index"], {}),
        "zeros_like": ("zeros_like", [], {}),
        "dropout": ("dropout", ["p", "training", "inplace"], {"p": 0.5, "training": True}),
        "contiguous": ("identity", [], {}),
        "clone": ("identity", [], {}),
        "detach": ("identity", [], {}),
        # Casts are identities here: the builder accepts float32 values only, before and after.
        "float": ("identity", [], {}),
        "to": ("identity", ["dtype"], {}),
        "type_as": ("identity", ["other"], {}),
        "t": ("transpose", [], {"dim0": -2, "dim1": -1}),
        "transpose": ("transpose", ["dim0", "dim1"], {}),
        "swapaxes": ("transpose", ["dim0", "dim1"], {}),
        "permute": ("permute", ["dims"], {}),
        "view": ("reshape", ["shape"], {}),
        "reshape": ("reshape", ["shape"], {}),
        "unsqueeze": ("reshape", ["dim"], {}),
        "squeeze": ("reshape", ["dim"], {"dim": None}),
        "flatten": ("reshape", ["start_dim", "end_dim"], {"start_dim": 0, "end_dim": -1}),
        # whole-task families of their own (matcher/special.py): a loss, attention, a
        # triangular part of a matrix product
        "cross_entropy": (
            "cross_entropy",
            [
                "target",
                "weight",
                "size_average",
                "ignore_index",
                "reduce",
                "reduction",
                "label_smoothing",
            ],
            {
                "weight": None,
                "size_average": None,
                "ignore_index": -100,
                "reduce": None,
                "reduction": "mean",
                "label_smoothing": 0.0,
            },
        ),
        "kl_div": (
            "kl_div",
            ["target", "size_average", "reduce", "reduction", "log_target"],
            {"size_average": None, "reduce": None, "reduction": "mean", "log_target": False},
        ),
        "triplet_margin_loss": (
            "triplet_margin_loss",
            ["positive", "negative", "margin", "p", "eps", "swap", "size_average", "reduce"]
            + ["reduction"],
            {
                "margin": 1.0,
                "p": 2.0,
                "eps": 1e-6,
                "swap": False,
                "size_average": None,
                "reduce": None,
                "reduction": "mean",
            },
        ),
        "scaled_dot_product_attention": (
            "sdpa",
            ["key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"],
            {
                "attn_mask": None,
                "dropout_p": 0.0,
                "is_causal": False,
                "scale": None,
                "enable_gqa": False,
            },
        ),
        "triu": ("triu", ["diagonal"], {"diagonal": 0}),
        "tril": ("tril", ["diagonal"], {"diagonal": 0}),
    }
)
OPERATORS = {
    operator.add: "add",
    operator.sub: "sub",
    operator.mul: "mul",
    operator.truediv: "div",
    operator.pow: "pow",
    operator.neg: "neg",
    operator.matmul: "matmul",
    operator.iadd: "add",
    operator.isub: "sub",
    operator.imul: "mul",
    operator.itruediv: "div",
}
FUNCTION_NAMES = {
    torch.linalg.vector_norm: "vector_norm",
    F.relu6: "relu6",
    F.celu: "celu",
    torch.clamp_min: "clamp_min",
    torch.clamp_max: "clamp_max",
}
