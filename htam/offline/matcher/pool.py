"""The pool family: max or average pooling of a forward input by a pooling module."""

from __future__ import annotations

import torch

from htam.offline.front.lower import CNode
from htam.offline.front.trace import NoMatch
from htam.offline.ir.model import PoolIR

POOL_OPS = ("max_pool", "avg_pool")


def match_pool(out: CNode, pools: list[CNode]) -> tuple[PoolIR, str]:
    """(ir, summary) when ``out`` is one pooling module applied to a float32 forward input."""
    pool = pools[0]
    if len(pools) > 1 or out is not pool:
        raise NoMatch(
            f"{pool.op} ({pool.name}) with other operations around it; the pool family covers "
            "one pooling module applied to an input"
        )
    x = pool.args[0]
    tensor = isinstance(x, CNode) and isinstance(x.value, torch.Tensor)
    if not tensor or x.op != "input" or x.value.dtype != torch.float32:
        raise NoMatch(f"{pool.op} ({pool.name}) of other than a float32 forward input")
    nd = pool.attrs["nd"]
    if len(x.shape) not in (nd + 1, nd + 2):
        raise NoMatch(f"{pool.op} ({pool.name}) of a {len(x.shape)}-d tensor")
    kind = pool.op.split("_")[0]
    adaptive = bool(pool.attrs.get("adaptive"))
    ir = PoolIR(kind, nd, pool.attrs["path"], x.attrs["name"], adaptive)
    return (
        ir,
        f"{'adaptive ' if adaptive else ''}{kind} pool {nd}d ({pool.attrs['path']}) of {list(x.shape)}",
    )
