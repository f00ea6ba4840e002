"""The matched task in a form the code generators read: SSA programs over kernel operands.

A :class:`Program` is a list of primitive operations in SSA form. An argument is an ``int``
(the index of an earlier op), a ``str`` (the name of a kernel operand, or ``"acc"`` for a GEMM
accumulator) or a ``float`` (a constant). Every op is evaluated at the resolution of the output
element (elementwise ops commute with broadcasting), except ops of kind ``"row"`` in the row
family, which hold one value per reduced row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

from htam.offline.ir.permute import PermuteIR
from htam.offline.ir.special import AttentionIR, LossIR, TriangularIR

SpecialIR = LossIR | AttentionIR | TriangularIR | PermuteIR

Arg = int | str | float

REDUCTIONS = ("rsum", "rmax", "rmin", "rargmax", "rargmin")
ACC = "@acc"  # the GEMM accumulator in an epilogue program (never an operand's name)
LIBRARY_PREFIX = "lib_"  # operands a library prefix computes (htam.offline.matcher.library)


@dataclass(frozen=True)
class Op:
    name: str
    args: tuple[Arg, ...] = ()
    attrs: tuple[tuple[str, Any], ...] = ()
    kind: str = "elem"  # "elem" or "row"

    def attr(self, key: str, default: Any = None) -> Any:
        return dict(self.attrs).get(key, default)


@dataclass
class Program:
    ops: list[Op] = field(default_factory=list)
    out: Arg = 0

    def add(self, op: Op) -> int:
        self.ops.append(op)
        return len(self.ops) - 1

    def describe(self) -> str:
        return " -> ".join(op.name for op in self.ops) or "identity"


@dataclass(frozen=True)
class Operand:
    """A tensor the kernel reads, indexed from the flat output index of the program.

    The operand's non-broadcast dims form one block of the output dims; ``tail`` counts the
    output dims after that block, so at run time ``inner = prod(out.shape[rank - tail:])`` and
    the element read is ``(flat // inner) % numel``. ``pattern`` names the cheaper special cases:
    ``full`` (same shape), ``scalar`` (one element), ``lead`` (``flat // inner``), ``trail``
    (``flat % numel``) and ``mid`` (both).
    """

    name: str
    source: str  # Python expression in ModelNew.forward that yields the tensor
    pattern: str
    tail: int = 0
    head: int = 0  # first output dim of the block

    @property
    def library_result(self) -> bool:
        """A tensor the library prefix computed, of the output's shape (a convolution's result
        the channels-last epilogue reads in that order)."""
        return self.pattern == "full" and self.name.startswith(LIBRARY_PREFIX)


@dataclass
class EwIR:
    prog: Program
    operands: list[Operand]
    primary: str  # operand with the output's shape: sizes are read from it at run time
    rank: int


@dataclass
class RowIR:
    prog: Program
    operands: list[Operand]
    primary: str  # operand with the reduced tensor's shape
    rank: int
    d0: int  # first reduced dim
    d1: int  # last reduced dim (the reduced dims are d0..d1, contiguous)
    out_kind: str  # "elem": same shape as the input; "row": one value per row
    keepdim: bool
    out_dtype: str  # "float32" or "int64"
    # reduced dims not adjacent: the operands read permuted, kept dims first (rows_permuted.py)
    perm: tuple[int, ...] = ()


@dataclass
class ScanIR:
    """A cumulative sum or product along ``dim`` of an elementwise program's values: the
    tensor seen as ``(outer, R, inner)`` with ``R`` the scanned dim."""

    prog: Program  # the element values scanned (an elementwise program)
    operands: list[Operand]
    primary: str  # operand with the scanned tensor's shape
    rank: int
    dim: int
    combine: str  # "sum" | "prod"
    reverse: bool = False  # from the end of the dim (flip, scan, flip)
    exclusive: bool = False  # each position holds the scan of the elements before it


@dataclass
class PoolIR:
    """Max or average pooling (1-3 spatial dims) of a forward input by a pooling module of
    the model: its window (kernel, stride, padding, dilation, ceil mode, divisor) is read from
    the module at every call, never compiled in from the traced values."""

    kind: str  # "max" | "avg"
    nd: int  # spatial dims
    module: str  # the pooling module's dotted path in the model
    source: str  # forward expression of the pooled tensor
    adaptive: bool = False  # nn.AdaptiveMax/AvgPool: windows from the output size


@dataclass
class ConvIR:
    """A chain of convolutions or transposed convolutions (1-3 spatial dims, groups) of a
    forward input by convolution modules of the model, whose window, groups, weight and bias
    the forward reads at every call."""

    stages: list[tuple[str, int, bool]]  # (module's dotted path, spatial dims, transposed)
    source: str  # forward expression of the first convolution's input


@dataclass
class ChannelNormIR:
    """BatchNorm (statistics per channel over the batch and positions, training mode as the
    reference computes them; running statistics in eval mode) or GroupNorm (per sample and
    group of channels) of a forward input by a norm module of the model, whose eps, affine
    parameters and running statistics the forward reads at every call."""

    kind: str  # "batch" | "group"
    module: str  # the norm module's dotted path in the model
    source: str  # forward expression of the normalized tensor


@dataclass(frozen=True)
class GemmSide:
    source: str  # forward expression of the stored tensor
    transposed: bool  # the product reads it with its last two dims swapped
    rank: int


@dataclass
class GemmIR:
    a: GemmSide
    b: GemmSide
    fold_batch: bool  # A's leading dims fold into M (B is one matrix, A not transposed)
    epilogue: Program  # over ACC; an empty program is the plain product
    operands: list[Operand]
    out_rank: int

    @property
    def has_epilogue(self) -> bool:
        return bool(self.epilogue.ops)


_IR = TypeVar("_IR")


@dataclass
class Match:
    # "elementwise" | "row" | "gemm" | "scan" | "pool" | "channel_norm" | "conv" | "loss" |
    # "attention" | "triangular" | "permute"
    family: str
    summary: str
    inputs: list[str]  # forward argument names, in order
    ir: EwIR | RowIR | GemmIR | ScanIR | PoolIR | ChannelNormIR | ConvIR | SpecialIR
    init_source: str  # ModelNew's __init__ method, copied from the reference
    preamble: str = ""  # imports and module-level helpers that __init__ needs
    features: dict[str, bool] = field(default_factory=dict)  # e.g. online_softmax, welford
    # Float attributes of the reference module (alpha, eps, ...): the trace compiles their values
    # into the kernels, so the generated __init__ checks that it is built with the same ones.
    scalars: dict[str, float] = field(default_factory=dict)
    # Float attributes the kernels read from one-element buffers ModelNew makes in __init__
    # (``self._htam_<name>``): other init values run the same code.
    attr_buffers: tuple[str, ...] = ()
    # Library prefix (htam.offline.matcher.library): forward lines computing, with torch, the tensors the
    # kernel reads as operands (a convolution, a GEMM...); empty when the kernel reads inputs only.
    prelude: list[str] = field(default_factory=list)
    library: str = ""  # what the prelude computes, for the summary ("" without one)
    layers: int = 0  # the prefix's convolutions, matrix products, attentions (a network's layers)
    # Forward inputs a channels-last prefix's convolutions read directly (the kernel does not).
    conv_inputs: tuple[str, ...] = ()
    # The prefix's matrix products of inputs and parameters, by the prelude line computing each.
    prefix_gemms: dict[str, GemmIR] = field(default_factory=dict)
    # What the kernels assume of the forward's tensors (htam.offline.guard.input_checks):
    # ModelNew refuses other inputs rather than compute garbage from them.
    input_checks: dict = field(default_factory=dict)

    def describe(self) -> str:
        return f"{self.family}: {self.summary}"

    def ir_as(self, kind: type[_IR]) -> _IR:
        """The IR as its family's type (``family`` says which: the caller checked it)."""
        assert isinstance(self.ir, kind), f"{self.family} match holds a {type(self.ir).__name__}"
        return self.ir
