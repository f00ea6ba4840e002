"""Template parameters, the baseline per family, and strategies as transformations of them.

A strategy is a function from the current parameter set (parsed back from the base code's
``# htam-offline:`` header) to the next one. Sweeps (block sizes, rows per program, vector
width, tile shapes) step along a ladder and wrap around; switches (fusion, online softmax,
Welford, register cache, exp2, tf32, split tail) turn on once, after which the strategy no longer
applies to that code.
"""

from __future__ import annotations

import json
import re

from htam.offline.ir.expr import EXP_OPS
from htam.offline.ir.model import Match

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
BLOCKS = [1024, 2048, 4096, 512]
VECS = [1, 4, 8]
ROWS = [1, 2, 4, 8]
BKS = [32, 64, 16]
TILES = [(32, 32, 4, 1), (64, 64, 4, 3), (128, 128, 8, 3), (64, 128, 4, 4)]  # bm, bn, warps, stages
HEADER = "# htam-offline: "


class StrategyError(Exception):
    """The strategy has no template for this task, or changes nothing in the base code."""


def baseline(match: Match) -> dict:
    ir = match.ir
    common = {"vec": 1, "split_tail": False, "exp2": False}
    if match.family == "elementwise":
        return {**common, "fuse": len(ir.prog.ops) == 1, "block": 1024, "warps": 4}
    if match.family == "row":
        return {
            **common,
            "rows": 1,
            "block": 1024,
            "warps": 4,
            "cache": False,
            "online": False,
            "welford": False,
            "lanes": False,
            "coalesce": False,
        }
    epilogue = "fused" if not ir.has_epilogue else ("ops" if len(ir.epilogue.ops) > 1 else "kernel")
    return {
        **common,
        "epilogue": epilogue,
        "tile": 0,
        "bk": 32,
        "group_m": 1,
        "mr": 1,
        "tf32": False,
    }


def applicable(match: Match, language: str) -> list[str]:
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
        ids += ["precision.tensor_core_dot"] if language == "triton" else []
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


def apply_strategy(strategy_id: str, params: dict, match: Match, language: str) -> dict:
    """The parameters after applying the strategy; StrategyError when it does not apply."""
    if strategy_id not in _TRANSFORMS:
        raise StrategyError(f"{strategy_id} is not a strategy the offline templates know")
    if strategy_id not in applicable(match, language):
        raise StrategyError(
            f"{strategy_id} has no template for the {match.family} family "
            f"of this task ({match.summary}) in {language}"
        )
    new = _TRANSFORMS[strategy_id](dict(params), match.family)
    if new == params:
        raise StrategyError(f"{strategy_id} is already applied in the base code")
    return new


def header(family: str, language: str, params: dict, applied: list[str]) -> str:
    data = {"family": family, "language": language, "params": params, "applied": applied}
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
