"""Coarse op families of a reference, from the op names of its trace.

The vocabulary is fixed (``FAMILIES``); other parts key templates, memory triggers and prompts on
it. Op names come from torch.fx (module class names, function and method names) or from aten
dispatch (``addmm``, ``native_layer_norm``...), lower-cased, without leading or trailing
underscores. Layout and bookkeeping ops (views, transposes, constants) belong to no family;
whole attention or transformer modules (``MultiheadAttention``, fx leaves) are ``attention``.
Patterns over the op sequence add a family the single ops do not show: batched matmul,
softmax, batched matmul is ``attention``; a mean/var followed by a (r)sqrt is ``normalization``
(a hand-written RMS or layer norm), and so is a norm followed by a division (x / ||x||) or abs,
sum or mean, division (x / mean |x|); exp, sum, div is ``softmax``. The patterns read the
order of the ops, not what feeds what: coarse, as priors may be (``torch.norm(x) / 2`` is a
normalization here).
"""

from __future__ import annotations

FAMILIES = (
    "elementwise",
    "reduction",
    "normalization",
    "softmax",
    "gemm",
    "conv",
    "attention",
    "other",
)

GEMM = {
    "linear", "matmul", "mm", "bmm", "addmm", "baddbmm", "addbmm", "einsum", "bilinear",
    "addmv", "mv", "dot", "vdot", "inner", "outer", "tensordot",
}  # fmt: skip
BATCHED_GEMM = {"matmul", "bmm", "baddbmm", "einsum"}
SOFTMAX = {"softmax", "log_softmax", "softmin", "logsoftmax"}
REDUCTION = {
    "sum", "mean", "max", "min", "amax", "amin", "argmax", "argmin", "prod", "std", "var",
    "var_mean", "std_mean", "logsumexp", "cumsum", "cumprod", "norm", "vector_norm",
    "linalg_vector_norm", "all", "any", "median", "nansum", "count_nonzero", "aminmax",
}  # fmt: skip
ELEMENTWISE = {
    "relu", "relu6", "gelu", "sigmoid", "tanh", "silu", "hardswish", "hardsigmoid", "hardtanh",
    "leaky_relu", "leakyrelu", "elu", "selu", "celu", "mish", "softplus", "softsign", "prelu",
    "threshold", "logsigmoid", "tanhshrink", "softshrink", "hardshrink", "glu", "swish",
    "add", "sub", "rsub", "mul", "div", "truediv", "floordiv", "floor_divide", "mod", "fmod",
    "remainder", "pow", "neg", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt",
    "rsqrt", "abs", "clamp", "clip", "clamp_min", "clamp_max", "minimum", "maximum", "where",
    "masked_fill", "sin", "cos", "tan", "erf", "erfc", "reciprocal", "sign", "floor", "ceil",
    "round", "trunc", "frac", "square", "lerp", "addcmul", "addcdiv", "dropout", "eq", "ne",
    "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_not", "bitwise_and",
    "sigmoid_backward", "to", "float", "half", "bfloat16", "type_as", "copysign", "hypot",
    "atan", "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh", "xlogy", "nan_to_num",
    "to_copy", "native_dropout", "isnan", "isinf", "bitwise_or", "bitwise_not",
}  # fmt: skip
LAYOUT = {
    "view", "reshape", "permute", "transpose", "t", "contiguous", "flatten", "unflatten",
    "squeeze", "unsqueeze", "expand", "expand_as", "split", "split_with_sizes", "chunk",
    "unbind", "cat", "concat", "stack", "clone", "copy", "detach", "getitem", "getattr", "size",
    "dim", "narrow", "select", "slice", "unsafe_view", "alias", "ones", "zeros", "full",
    "empty", "empty_like", "ones_like", "zeros_like", "full_like", "arange", "triu", "tril",
    "lift_fresh", "lift_fresh_copy", "scalar_tensor", "new_ones", "new_zeros", "new_empty",
    "new_full", "as_strided", "movedim", "identity", "numel",
    "fill", "zero", "repeat", "roll", "flip", "pad", "constant_pad_nd",
}  # fmt: skip
NOT_NORMALIZATION = {"norm", "vector_norm", "linalg_vector_norm", "frobenius_norm"}


def op_family(op: str) -> str | None:
    """The family of one op name, or None for layout/bookkeeping ops."""
    name = op.lower().strip("_")
    if name in LAYOUT:
        return None
    if "attention" in name or "sdpa" in name or "transformer" in name:
        return "attention"
    if name in SOFTMAX:
        return "softmax"
    if ("norm" in name and name not in NOT_NORMALIZATION) or name == "normalize":
        return "normalization"
    if name in GEMM:
        return "gemm"
    if name.startswith("conv") or "convolution" in name:
        return "conv"
    if name in REDUCTION:
        return "reduction"
    if name in ELEMENTWISE:
        return "elementwise"
    return "other"


def families(ops: list[str]) -> list[str]:
    """Families of an op sequence, each once, in order of first appearance."""
    found: list[tuple[int, str]] = []
    for index, op in enumerate(ops):
        family = op_family(op)
        if family is not None:
            found.append((index, family))
    names = [op.lower().strip("_") for op in ops]
    for pattern, family in _PATTERNS:
        start = _find_sequence(names, pattern)
        if start is not None:
            found.append((start, family))
    result: list[str] = []
    for _, family in sorted(found, key=lambda item: item[0]):
        if family not in result:
            result.append(family)
    return result


_PATTERNS: list[tuple[tuple[set[str], ...], str]] = [
    ((BATCHED_GEMM, SOFTMAX, BATCHED_GEMM), "attention"),
    (({"mean", "var", "var_mean"}, {"rsqrt", "sqrt"}), "normalization"),
    (({"exp"}, {"sum"}, {"div", "truediv"}), "softmax"),
    ((NOT_NORMALIZATION, {"div", "truediv"}), "normalization"),  # x / ||x||
    (({"abs"}, {"sum", "mean"}, {"div", "truediv"}), "normalization"),  # x / mean|x|
]


def _find_sequence(names: list[str], pattern: tuple[set[str], ...]) -> int | None:
    """Index of the first op of ``pattern`` found as a subsequence of ``names``, or None."""
    start: int | None = None
    position = 0
    for index, name in enumerate(names):
        if name in pattern[position]:
            if position == 0:
                start = index
            position += 1
            if position == len(pattern):
                return start
    return None
