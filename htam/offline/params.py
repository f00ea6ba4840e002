"""Template parameters: the baseline per family, the ladders the sweeps step along, and the
``# htam-offline:`` header that carries a candidate's parameters to the next step (the
strategies that change them are :mod:`htam.offline.strategies`)."""

from __future__ import annotations

import json
import re

from htam.offline.ir.model import Match

BLOCKS = [1024, 2048, 4096, 512]
VECS = [1, 4, 8]
ROWS = [1, 2, 4, 8]
BKS = [32, 64, 16]
TILES = [(32, 32, 4, 1), (64, 64, 4, 3), (128, 128, 8, 3), (64, 128, 4, 4)]  # bm, bn, warps, stages
HEADER = "# htam-offline: "


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
