"""The IRs of the whole-task families of one library operation on forward inputs: a loss, the
attention product, and a triangular part of a matrix product."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class LossIR:
    """Cross-entropy of logits and class indices, KL divergence, or the triplet margin loss:
    a value per row of the inputs' last dim, then the reduction over the rows."""

    kind: str  # "cross_entropy" | "kl_div" | "triplet"
    sources: tuple[str, ...]  # forward expressions of the inputs, in the operation's order
    reduction: str  # "mean" | "sum" | "none" | "batchmean" (kl_div)
    log_input: bool = False  # kl_div: the input is log(source), taken in the kernel
    log_target: bool = False  # kl_div
    ignore_index: int = -100  # cross_entropy
    margin: str = "1.0"  # triplet: forward expression of the margin (the module's, per call)
    eps: float = 1e-6  # triplet: pairwise_distance's eps


@dataclass
class AttentionIR:
    """softmax(Q K^T * scale [+ causal mask]) V of forward inputs (..., S, D)."""

    q: str
    k: str
    v: str
    causal: bool
    scale: float | None  # None: 1 / sqrt(D)


@dataclass
class TriangularIR:
    """triu or tril (with a diagonal offset) of the product of two forward matrices."""

    a: str
    b: str
    upper: bool
    diagonal: int


# both backends' loss kernels take the kind as this number
KINDS = {"cross_entropy": 0, "kl_div": 1, "triplet": 2}


def loss_forward(ir: LossIR) -> list[str]:
    """Forward lines up to the launches: the inputs as rows (``a``, ``b``, ``c``), the row
    count ``R`` and length ``L``, ``rows`` (each row's value; cross-entropy's counted flags
    after them) and ``den`` (what the rows' sum is divided by)."""
    srcs = list(ir.sources) + [ir.sources[0]] * (3 - len(ir.sources))
    lines = [f"x0 = {srcs[0]}", "L = x0.shape[-1] if x0.dim() else 1", "R = x0.numel() // L"]
    lines += [
        f"a = {srcs[0]}.reshape(R, -1).contiguous()",
        f"b = {srcs[1]}.reshape(-1).contiguous()",
        f"c = {srcs[2]}.reshape(R, -1).contiguous()",
    ]
    flags = ir.kind == "cross_entropy"  # the kernel stores each row's flag after the values
    lines.append(f"rows = torch.empty({'2 * R' if flags else 'R'}, dtype=torch.float32, "
                 "device=x0.device)")  # fmt: skip
    den = {"sum": "1.0", "none": "1.0", "batchmean": "float(x0.shape[0])"}.get(
        ir.reduction, "float(x0.numel())" if ir.kind == "kl_div" else "float(R)"
    )
    return [*lines, f"den = {den}"]
