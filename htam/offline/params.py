"""Template parameters: one frozen class per family, the baseline, the ladders the sweeps step
along, and the ``# htam-offline:`` header that carries a candidate's parameters to the next step
(the strategies that change them are :mod:`htam.offline.strategies`).

The header is the JSON of the fields (``dataclasses.asdict``, keys sorted), so a header written
when the parameters were plain dicts reads back the same: :meth:`Params.updated` takes the
header's value for every field it names and the baseline's for the rest.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, TypeVar

from htam.offline.ir.model import EwIR, GemmIR, Match

BLOCKS = [1024, 2048, 4096, 512]
VECS = [1, 4, 8]
ROWS = [1, 2, 4, 8]
BKS = [32, 64, 16]
TILES = [(32, 32, 4, 1), (64, 64, 4, 3), (128, 128, 8, 3), (64, 128, 4, 4)]  # bm, bn, warps, stages
HEADER = "# htam-offline: "

P = TypeVar("P", bound="Params")


@dataclass(frozen=True)
class Params:
    """What every family's templates read."""

    vec: int = 1  # vector width (1: scalar access)
    split_tail: bool = False  # full blocks unmasked, the ragged tail apart
    exp2: bool = False  # exponentials as exp2(x * log2(e))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def updated(self: P, values: dict[str, Any]) -> P:
        """A copy with the fields ``values`` names (a header's params) taken from it."""
        return replace(self, **{f.name: values[f.name] for f in fields(self) if f.name in values})


@dataclass(frozen=True)
class EwParams(Params):
    fuse: bool = False  # one kernel (loop) for the chain, not one per op
    block: int = 1024  # elements per program (per OpenMP chunk)
    warps: int = 4
    # convolutions channels-last (weights converted once), the fused kernel reading their
    # result in that order and writing the output in the reference's (a tiled transpose)
    layout: bool = False


@dataclass(frozen=True)
class RowParams(Params):
    rows: int = 1  # rows per program
    block: int = 1024  # columns per tile
    warps: int = 4
    # register row cache: a row that fits is loaded once; on a GPU a longer one is read once
    # by chunks that wait for each other (backends/triton/coop.py)
    cache: bool = False
    online: bool = False  # online softmax: max and sum in one pass
    welford: bool = False  # Welford: mean and variance in one pass
    lanes: bool = False  # per-lane partials reduced once (warp shuffle)
    coalesce: bool = False  # adjacent rows per program when the reduced dim is not the last
    # convolutions channels-last (weights converted once): a reduction over channels reads
    # contiguous rows of the result's channels
    layout: bool = False


@dataclass(frozen=True)
class GemmParams(Params):
    epilogue: str = (
        "fused"  # "fused" in the GEMM kernel, one "kernel" after it, or "ops": one per op
    )
    tile: int = 0  # index into TILES; -1: chosen per shape at run time (the baseline)
    bk: int = 32  # K step; 0: chosen per shape with the tile
    group_m: int = 1  # grouped program order (L2 reuse of A's rows)
    mr: int = 1  # rows of A per register block (C++)
    # Triton dot precision: True TF32 for every K, False IEEE fp32, None (the baseline) TF32
    # where the evaluator's float32 tolerance allows it for the run-time K
    tf32: bool | None = False


@dataclass(frozen=True)
class ModelParams(Params):
    """A whole model's kernels (htam.offline.graph): elements per program, and whether a
    library call's or batch norm's following activation is fused into its epilogue kernel."""

    block: int = 1024
    warps: int = 4
    fuse: bool = True


@dataclass(frozen=True)
class ScanParams(Params):
    rows: int = 4  # rows scanned side by side per program
    block: int = 1024  # columns per tile (a carry joins the tiles of a row)
    warps: int = 4


@dataclass(frozen=True)
class PoolParams(Params):
    block: int = 1024  # output elements per program (per OpenMP chunk)
    warps: int = 4


@dataclass(frozen=True)
class ChannelNormParams(Params):
    block: int = 1024  # elements per tile of a contiguous segment
    warps: int = 4
    programs: int = 1024  # at least this many programs when the statistics allow a split


@dataclass(frozen=True)
class ConvParams(Params):
    block_m: int = 64  # output positions per program (implicit GEMM)
    block_n: int = 0  # output channels per program; 0: the group's, 16 to 64, per call
    block_k: int = 32  # reduction step over input channels x window
    block: int = 256  # outputs per program of the direct (depthwise) kernel, per OpenMP chunk
    warps: int = 4
    # TF32 dot: True always, False IEEE fp32, None (the baseline) while the reduction length is
    # within the evaluator's float32 tolerance (backends/triton/gemm_plan.tf32_max_k)
    tf32: bool | None = None


@dataclass(frozen=True)
class LossParams(Params):
    block: int = 1024  # elements of a row per step
    warps: int = 4


@dataclass(frozen=True)
class AttentionParams(Params):
    block_m: int = 64  # queries per program
    block_n: int = 64  # keys per step
    block_d: int = 64  # head dims per step of Q K^T (the reduction)
    warps: int = 4
    tf32: bool | None = None  # as ConvParams.tf32


@dataclass(frozen=True)
class TriangularParams(Params):
    block_m: int = 64
    block_n: int = 64
    block_k: int = 32
    warps: int = 4
    tf32: bool | None = None  # as ConvParams.tf32


FAMILY_PARAMS: dict[str, type[Params]] = {
    "elementwise": EwParams,
    "row": RowParams,
    "gemm": GemmParams,
    "model": ModelParams,
    "scan": ScanParams,
    "pool": PoolParams,
    "channel_norm": ChannelNormParams,
    "conv": ConvParams,
    "loss": LossParams,
    "attention": AttentionParams,
    "triangular": TriangularParams,
    "permute": PoolParams,  # a strided copy: output elements per program, as a pool's
}


def baseline(match: Match, language: str = "triton") -> Params:
    if match.family == "model":
        return ModelParams()
    if match.family == "elementwise":
        if match.features.get("channels_last") and language == "triton":
            # A convolution's epilogue: fused, read channels-last. On the H200 (KernelBench
            # level 2, 18 such tasks) this beat the unfused chain on every one and the fused
            # one in the reference's order on all but L2 54 (docs/results-h200.md, run 15).
            return EwParams(fuse=True, layout=True)
        return EwParams(fuse=len(match.ir_as(EwIR).prog.ops) == 1)
    if match.family == "row":
        if match.features.get("channels_last") and language == "triton":
            # a convolution's result reduced over its channels: rows of a few dozen contiguous
            # channels, 8 to a program. H200, run 23: L2 25 1.39x eager (1.09x in the reference
            # order), L2 32 1.48x (1.21x); one row a program 0.67x and 1.04x
            return RowParams(layout=True, rows=8)
        return RowParams()
    if match.family == "scan":
        return ScanParams()
    if match.family in ("pool", "permute"):
        return PoolParams()
    if match.family == "channel_norm":
        return ChannelNormParams()
    if match.family in ("conv", "loss", "attention", "triangular"):
        return FAMILY_PARAMS[match.family]()
    ir = match.ir_as(GemmIR)
    epilogue = "fused" if not ir.has_epilogue else ("ops" if len(ir.epilogue.ops) > 1 else "kernel")
    # tile, K step and precision chosen per shape (backends/triton/gemm_plan.py); C++: untiled
    return GemmParams(epilogue=epilogue, tile=-1, bk=0, tf32=None)


def header(family: str, language: str, params: Params, applied: list[str]) -> str:
    data = {"family": family, "language": language, "params": params.as_dict(), "applied": applied}
    return HEADER + json.dumps(data, sort_keys=True)


def parse_header(code: str | None) -> dict | None:
    """The header of code this proposer wrote, or None (no code, or someone else's code)."""
    if not code:
        return None
    found = re.search(r"^# htam-offline: (\{.*\})\s*$", code, flags=re.MULTILINE)
    if not found:
        return None
    try:
        data = json.loads(found.group(1))
    except json.JSONDecodeError:
        return None
    ok = isinstance(data, dict) and isinstance(data.get("params"), dict)
    return data if ok else None
