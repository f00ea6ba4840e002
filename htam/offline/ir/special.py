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
