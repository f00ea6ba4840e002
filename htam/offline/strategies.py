"""Local strategies as transformations of a family's template parameters.

A strategy maps the current parameter set (parsed back from the base code's ``# htam-offline:``
header) to the next one. Sweeps (block sizes, rows per program, vector width, tile shapes) step
along a ladder and wrap around; switches (fusion, online softmax, Welford, register cache,
exp2, tf32, split tail) turn on once, after which the strategy no longer applies to that code.
Which strategies a backend realizes is the backend's (:mod:`htam.offline.backends`).
"""

from __future__ import annotations

from htam.offline.ir.expr import EXP_OPS
from htam.offline.ir.model import Match
from htam.offline.params import BKS, BLOCKS, ROWS, TILES, VECS

STRATEGIES = (
    "fusion.elementwise_chain_fusion",
    "fusion.epilogue_fusion",
    "memory_access.vectorized_access",
    "memory_access.coalesced_row_access",
    "parallel_mapping.block_size_tuning",
    "parallel_mapping.rows_per_program",
    "data_reuse.register_row_cache",
    "data_reuse.shared_memory_tiling",
    "algorithmic_rewrite.online_softmax",
    "algorithmic_rewrite.welford_statistics",
    "instruction_throughput.warp_shuffle_reduction",
    "instruction_throughput.fast_exp2",
    "precision.tensor_core_dot",
    "boundary_handling.masked_tail",
)


class StrategyError(Exception):
    """The strategy has no template for this task, or changes nothing in the base code."""


def family_strategies(match: Match) -> list[str]:
    """Strategies with a template for this task's family (whatever the current parameters)."""
    fam, ir, f = match.family, match.ir, match.features
    ids = [
        "memory_access.vectorized_access",
        "parallel_mapping.block_size_tuning",
        "boundary_handling.masked_tail",
    ]
    prog = ir.epilogue if fam == "gemm" else ir.prog
    if any(op.name in EXP_OPS for op in prog.ops):
        ids.append("instruction_throughput.fast_exp2")
    if fam == "elementwise" and len(ir.prog.ops) > 1:
        ids.append("fusion.elementwise_chain_fusion")
    if fam == "row":
        ids += [
            "parallel_mapping.rows_per_program",
            "data_reuse.register_row_cache",
            "instruction_throughput.warp_shuffle_reduction",
        ]
        ids += ["memory_access.coalesced_row_access"] if f.get("strided_rows") else []
        ids += ["algorithmic_rewrite.online_softmax"] if f.get("online_softmax") else []
        ids += ["algorithmic_rewrite.welford_statistics"] if f.get("welford") else []
    if fam == "gemm":
        ids += ["parallel_mapping.rows_per_program", "data_reuse.shared_memory_tiling"]
        ids += ["precision.tensor_core_dot"]
        if ir.has_epilogue:
            ids.append("fusion.epilogue_fusion")
            ids += ["fusion.elementwise_chain_fusion"] if len(ir.epilogue.ops) > 1 else []
    return [s for s in STRATEGIES if s in ids]


def _next(ladder: list, current) -> object:
    return ladder[(ladder.index(current) + 1) % len(ladder)] if current in ladder else ladder[0]


def _switch(params: dict, key: str, value=True) -> dict:
    return {**params, key: value}


def _block(p: dict, fam: str) -> dict:
    if fam == "gemm":
        return {**p, "bk": _next(BKS, p["bk"])}
    block = _next(BLOCKS, p["block"])
    return {**p, "block": block, "warps": 8 if block >= 2048 else 4}


def _fusion(p: dict, fam: str) -> dict:
    if fam == "gemm":
        return {**p, "epilogue": "kernel"} if p["epilogue"] == "ops" else p
    return _switch(p, "fuse")


_TRANSFORMS = {
    "fusion.elementwise_chain_fusion": _fusion,
    "fusion.epilogue_fusion": lambda p, fam: _switch(p, "epilogue", "fused"),
    "memory_access.vectorized_access": lambda p, fam: {**p, "vec": _next(VECS, p["vec"])},
    "memory_access.coalesced_row_access": lambda p, fam: _switch(p, "coalesce"),
    "parallel_mapping.block_size_tuning": _block,
    "parallel_mapping.rows_per_program": lambda p, fam: (
        {**p, "group_m": 8, "mr": 4} if fam == "gemm" else {**p, "rows": _next(ROWS, p["rows"])}
    ),
    "data_reuse.register_row_cache": lambda p, fam: _switch(p, "cache"),
    "data_reuse.shared_memory_tiling": lambda p, fam: {**p, "tile": (p["tile"] + 1) % len(TILES)},
    "algorithmic_rewrite.online_softmax": lambda p, fam: _switch(p, "online"),
    "algorithmic_rewrite.welford_statistics": lambda p, fam: _switch(p, "welford"),
    "instruction_throughput.warp_shuffle_reduction": lambda p, fam: {
        **p,
        "lanes": True,
        "warps": min(p["warps"], 2),
    },
    "instruction_throughput.fast_exp2": lambda p, fam: _switch(p, "exp2"),
    "precision.tensor_core_dot": lambda p, fam: _switch(p, "tf32"),
    "boundary_handling.masked_tail": lambda p, fam: _switch(p, "split_tail"),
}


def transform(strategy_id: str, params: dict, family: str) -> dict:
    """The parameters after ``strategy_id`` (the caller checked that it applies)."""
    return _TRANSFORMS[strategy_id](dict(params), family)
