"""Local strategies as transformations of a family's template parameters.

A strategy maps the current parameter set (parsed back from the base code's ``# htam-offline:``
header) to the next one. Sweeps (block sizes, rows per program, vector width, tile shapes) step
along a ladder and wrap around; switches (fusion, online softmax, Welford, register cache,
exp2, tf32, split tail) turn on once, after which the strategy no longer applies to that code.
Each family has its table of rules: a strategy applies to a task when its family's table has it
and the rule's condition holds for the match (an exponential to speed up, a chain to fuse...);
which of those a backend realizes is the backend's (:mod:`htam.offline.backends`). Parameters
are frozen: a transformation returns a new instance (``dataclasses.replace``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar, cast

from htam.memory.seed import load_seed
from htam.offline.ir.expr import EXP_OPS
from htam.offline.ir.model import EwIR, GemmIR, Match, Program, RowIR, ScanIR
from htam.offline.params import (
    BKS,
    BLOCKS,
    ROWS,
    TILES,
    VECS,
    AttentionParams,
    ChannelNormParams,
    ConvParams,
    EwParams,
    GemmParams,
    LossParams,
    ModelParams,
    Params,
    PoolParams,
    RowParams,
    ScanParams,
    TriangularParams,
)

# The order the offline proposer offers strategies in: by direction, then in the seed's order. The
# ids are the seed's (htam/memory/seed.json defines them once); the rule tables below say which
# strategies have a template (``STRATEGIES``, after them).
DIRECTION_ORDER = (
    "fusion",
    "memory_access",
    "parallel_mapping",
    "data_reuse",
    "algorithmic_rewrite",
    "instruction_throughput",
    "precision",
    "boundary_handling",
)


class StrategyError(Exception):
    """The strategy has no template for this task, or changes nothing in the base code."""


P = TypeVar("P", bound=Params)
T = TypeVar("T")
# the families whose kernels tile by ``block`` elements with ``warps`` per program
Blocked = TypeVar(
    "Blocked", EwParams, RowParams, ScanParams, PoolParams, ChannelNormParams, LossParams
)


@dataclass(frozen=True)
class Rule(Generic[P]):
    """How a strategy changes a family's parameters, and for which matches it has a template."""

    apply: Callable[[P], P]
    when: Callable[[Match], bool] = lambda match: True


def _program(match: Match) -> Program:
    """The elementwise part: the chain, the row program, or the GEMM's epilogue."""
    if match.family == "gemm":
        return match.ir_as(GemmIR).epilogue
    return cast("EwIR | RowIR | ScanIR", match.ir).prog  # the families with a program


def _has_exp(match: Match) -> bool:
    return any(op.name in EXP_OPS for op in _program(match).ops)


def _feature(name: str) -> Callable[[Match], bool]:
    return lambda match: bool(match.features.get(name))


def _next(ladder: Sequence[T], current: T) -> T:
    return ladder[(ladder.index(current) + 1) % len(ladder)] if current in ladder else ladder[0]


def _block(p: Blocked) -> Blocked:
    block = _next(BLOCKS, p.block)
    return replace(p, block=block, warps=8 if block >= 2048 else 4)


def _lanes(p: RowParams) -> RowParams:
    return replace(p, lanes=True, warps=min(p.warps, 2))


def _epilogue_kernel(p: GemmParams) -> GemmParams:
    """One kernel for the separate epilogue's chain (an epilogue fused into the GEMM stays)."""
    return replace(p, epilogue="kernel") if p.epilogue == "ops" else p


def _gemm_bk(p: GemmParams) -> GemmParams:
    """The K step ladder; from the per-shape choice (bk 0, usually 32) the first step is 64."""
    return replace(p, bk=64 if p.bk == 0 else _next(BKS, p.bk))


def _gemm_tile(p: GemmParams) -> GemmParams:
    """The fixed tiles in turn; from the per-shape choice (tile -1) the first is TILES[1]."""
    return replace(p, tile=1 if p.tile < 0 else (p.tile + 1) % len(TILES))


COMMON: dict[str, Rule[Any]] = {  # every family with a program has these fields
    "memory_access.vectorized_access": Rule(lambda p: replace(p, vec=_next(VECS, p.vec))),
    "instruction_throughput.fast_exp2": Rule(lambda p: replace(p, exp2=True), _has_exp),
    "boundary_handling.masked_tail": Rule(lambda p: replace(p, split_tail=True)),
}
ELEMENTWISE: dict[str, Rule[EwParams]] = {
    **COMMON,
    "fusion.elementwise_chain_fusion": Rule(
        lambda p: replace(p, fuse=True), lambda m: len(m.ir_as(EwIR).prog.ops) > 1
    ),
    "parallel_mapping.block_size_tuning": Rule(_block),
}
ROW: dict[str, Rule[RowParams]] = {
    **COMMON,
    "memory_access.coalesced_row_access": Rule(
        lambda p: replace(p, coalesce=True), _feature("strided_rows")
    ),
    "parallel_mapping.block_size_tuning": Rule(_block),
    "parallel_mapping.rows_per_program": Rule(lambda p: replace(p, rows=_next(ROWS, p.rows))),
    "data_reuse.register_row_cache": Rule(lambda p: replace(p, cache=True)),
    "algorithmic_rewrite.online_softmax": Rule(
        lambda p: replace(p, online=True), _feature("online_softmax")
    ),
    "algorithmic_rewrite.welford_statistics": Rule(
        lambda p: replace(p, welford=True), _feature("welford")
    ),
    "instruction_throughput.warp_shuffle_reduction": Rule(_lanes),
}
GEMM: dict[str, Rule[GemmParams]] = {
    **COMMON,
    "fusion.elementwise_chain_fusion": Rule(
        _epilogue_kernel,
        lambda m: m.ir_as(GemmIR).has_epilogue and len(m.ir_as(GemmIR).epilogue.ops) > 1,
    ),
    "fusion.epilogue_fusion": Rule(
        lambda p: replace(p, epilogue="fused"), lambda m: m.ir_as(GemmIR).has_epilogue
    ),
    "parallel_mapping.block_size_tuning": Rule(_gemm_bk),
    "parallel_mapping.rows_per_program": Rule(lambda p: replace(p, group_m=8, mr=4)),
    "data_reuse.shared_memory_tiling": Rule(_gemm_tile),
    "precision.tensor_core_dot": Rule(lambda p: replace(p, tf32=True)),
}


def _model_block(p: ModelParams) -> ModelParams:
    block = _next(BLOCKS, p.block)
    return replace(p, block=block, warps=8 if block >= 2048 else 4)


# A whole model (htam.offline.graph): the baseline fuses each epilogue already; the kernels'
# tile size is what a step changes.
MODEL: dict[str, Rule[ModelParams]] = {"parallel_mapping.block_size_tuning": Rule(_model_block)}
SCAN: dict[str, Rule[ScanParams]] = {
    "parallel_mapping.block_size_tuning": Rule(_block),
    "parallel_mapping.rows_per_program": Rule(lambda p: replace(p, rows=_next(ROWS, p.rows))),
}
POOL: dict[str, Rule[PoolParams]] = {"parallel_mapping.block_size_tuning": Rule(_block)}
CHANNEL_NORM: dict[str, Rule[ChannelNormParams]] = {
    "parallel_mapping.block_size_tuning": Rule(_block)
}
# the implicit GEMM's tile (positions x channels per program) and its K step
CONV_TILES = [(64, 0), (128, 64), (64, 32), (32, 16)]


def _conv_tile(p: ConvParams) -> ConvParams:
    bm, bn = _next(CONV_TILES, (p.block_m, p.block_n))
    return replace(p, block_m=bm, block_n=bn, warps=8 if bm * max(bn, 32) >= 8192 else 4)


CONV: dict[str, Rule[ConvParams]] = {
    "data_reuse.shared_memory_tiling": Rule(_conv_tile),
    "parallel_mapping.block_size_tuning": Rule(lambda p: replace(p, block_k=_next(BKS, p.block_k))),
    "precision.tensor_core_dot": Rule(lambda p: replace(p, tf32=True)),
}


def _tile(p: AttentionParams | TriangularParams) -> Params:
    bm, bn = _next([(64, 64), (128, 64), (32, 32)], (p.block_m, p.block_n))
    return replace(p, block_m=bm, block_n=bn, warps=8 if bm >= 128 else 4)


# attention and the triangular product: a tile of BLOCK_M x BLOCK_N and the dot's precision
TILED: dict[str, Rule[Any]] = {
    "data_reuse.shared_memory_tiling": Rule(_tile),
    "precision.tensor_core_dot": Rule(lambda p: replace(p, tf32=True)),
}
RULES: dict[str, dict[str, Rule[Any]]] = {
    "elementwise": ELEMENTWISE,
    "row": ROW,
    "gemm": GEMM,
    "model": MODEL,
    "scan": SCAN,
    "pool": POOL,
    "channel_norm": CHANNEL_NORM,
    "conv": CONV,
    "loss": {"parallel_mapping.block_size_tuning": Rule(_block)},
    "attention": TILED,
    "triangular": TILED,
    "permute": POOL,
}


def _offered() -> tuple[str, ...]:
    """The seed's strategies that have a rule, in DIRECTION_ORDER (a stable sort: within a
    direction, the seed's order)."""
    ruled = {s for table in RULES.values() for s in table}
    seeded = [n for n in load_seed()["locals"] if n["id"] in ruled]
    unknown = ruled - {n["id"] for n in seeded}
    if unknown:
        raise ValueError(f"rules for strategies the seed does not have: {sorted(unknown)}")
    ordered = sorted(seeded, key=lambda n: DIRECTION_ORDER.index(n["direction"]))
    return tuple(n["id"] for n in ordered)


STRATEGIES = _offered()


def family_strategies(match: Match) -> list[str]:
    """Strategies with a template for this task's family (whatever the current parameters)."""
    rules = RULES[match.family]
    return [s for s in STRATEGIES if s in rules and rules[s].when(match)]


def transform(strategy_id: str, params: Params, family: str) -> Params:
    """The parameters after ``strategy_id`` (the caller checked that it applies)."""
    return RULES[family][strategy_id].apply(params)
