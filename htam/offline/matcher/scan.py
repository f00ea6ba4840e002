"""The scan family: a cumulative sum or product along one dim of an elementwise chain's values
(``torch.cumsum(x * mask, dim)``), from either end (``flip``, scan, ``flip``)."""

from __future__ import annotations

from htam.offline.front.lower import CNode
from htam.offline.front.trace import NoMatch
from htam.offline.ir.model import ScanIR
from htam.offline.matcher.build import Builder, bind_device

SCAN_OPS = {"cumsum": "sum", "cumprod": "prod"}


def _flip_dims(n: CNode) -> tuple[int, ...]:
    dims = n.attrs.get("dims")
    dims = (dims,) if isinstance(dims, int) else tuple(dims or ())
    return tuple(sorted(d % len(n.shape) for d in dims))


def match_scan(out: CNode, scans: list[CNode]) -> tuple[ScanIR, str]:
    """(ir, summary) when ``out`` is the scan (or flip, scan, flip along its dim) of an
    elementwise chain; NoMatch says what else the graph does."""
    if len(scans) > 1:
        raise NoMatch(f"{len(scans)} scans; the scan family covers one")
    scan = scans[0]
    if scan.attrs.get("dtype") is not None:
        raise NoMatch(f"{scan.op} with dtype= ({scan.name})")
    rank = len(scan.shape)
    dim = scan.attrs["dim"] % rank if rank else 0
    src, reverse = scan.args[0], False
    if out is not scan:
        flipped = out.op == "flip" and out.args[0] is scan and _flip_dims(out) == (dim,)
        if not (flipped and src.op == "flip" and _flip_dims(src) == (dim,)):
            raise NoMatch(
                f"operations after the {scan.op} ({scan.name}): the scan family writes the "
                "scan itself or its reverse (flip, scan, flip)"
            )
        src, reverse = src.args[0], True
    builder = Builder(scan.shape)
    prog = builder.build(src)
    full = [op.name for op in builder.operands.values() if op.pattern == "full"]
    if not full:
        raise NoMatch(f"no input of the scanned shape {list(scan.shape)}")
    operands = bind_device(list(builder.operands.values()), full[0])
    exclusive = bool(scan.attrs.get("exclusive"))
    ir = ScanIR(prog, operands, full[0], rank, dim, SCAN_OPS[scan.op], reverse, exclusive)
    what = f"{'reverse ' if reverse else ''}{'exclusive ' if exclusive else ''}{scan.op}"
    return ir, f"{what} over dim {dim} of {list(scan.shape)} of [{prog.describe()}]"
