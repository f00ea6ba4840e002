"""Whole-task families of one operation on forward inputs: a loss (cross-entropy, KL
divergence, triplet margin), scaled-dot-product attention, triu/tril of a matrix product."""

from __future__ import annotations

from typing import Any

import torch

from htam.offline.front.lower import CNode
from htam.offline.front.trace import NoMatch
from htam.offline.ir.special import AttentionIR, LossIR, TriangularIR

LOSS_OPS = ("cross_entropy", "kl_div", "triplet_margin_loss")
SPECIAL_OPS = (*LOSS_OPS, "sdpa", "triu", "tril")


def _input(x: Any, what: str, dtype: torch.dtype = torch.float32, dims: int | None = None) -> str:
    """The forward input's name when ``x`` is one (of ``dtype``, ``dims`` dims), else NoMatch."""
    ok = isinstance(x, CNode) and x.op == "input" and isinstance(x.value, torch.Tensor)
    if not ok or x.value.dtype != dtype or (dims is not None and x.value.dim() != dims):
        raise NoMatch(f"{what}: the family reads forward inputs ({dtype}, {dims or 'any'}-d)")
    return x.attrs["name"]


def _one(out: CNode, nodes: list[CNode]) -> CNode:
    found = [n for n in nodes if n.op in SPECIAL_OPS]
    if len(found) > 1 or out is not found[0]:
        raise NoMatch(
            f"{found[0].op} ({found[0].name}) with other operations around it; its family covers "
            "the operation alone on forward inputs"
        )
    return out


def match_special(out: CNode, nodes: list[CNode]) -> tuple[str, Any, str]:
    """(family, ir, summary) of ``out``: one loss, attention or triangular product."""
    node = _one(out, nodes)
    if node.op in ("triu", "tril"):
        return "triangular", *_triangular(node, nodes)
    if node.op == "sdpa":
        return "attention", *_attention(node)
    return "loss", *_loss(node)


def _triangular(node: CNode, nodes: list[CNode]) -> tuple[TriangularIR, str]:
    mm = node.args[0]
    if not (isinstance(mm, CNode) and mm.op == "matmul") or len(nodes) != 4:
        raise NoMatch(f"{node.op} of other than a matrix product of two forward inputs")
    a = _input(mm.args[0], f"{node.op} of a product", dims=2)
    b = _input(mm.attrs["other"], f"{node.op} of a product", dims=2)
    ir = TriangularIR(a, b, node.op == "triu", int(node.attrs["diagonal"]))
    return ir, f"{node.op}(diagonal={ir.diagonal}) of {a} @ {b} {list(node.shape)}"


def _attention(node: CNode) -> tuple[AttentionIR, str]:
    at = node.attrs
    if at["attn_mask"] is not None or at["dropout_p"] or at["enable_gqa"]:
        raise NoMatch("scaled_dot_product_attention with a mask, dropout or GQA")
    q = _input(node.args[0], "attention's query")
    k, v = _input(at["key"], "attention's key"), _input(at["value"], "attention's value")
    shapes = {n.value.shape for n in (node.args[0], at["key"], at["value"])}
    if len(shapes) > 1 or node.args[0].value.dim() < 2:
        raise NoMatch("attention with query, key and value of different shapes")
    scale = at["scale"] if at["scale"] is None else float(at["scale"])
    ir = AttentionIR(q, k, v, bool(at["is_causal"]), scale)
    return ir, f"attention{' (causal)' if ir.causal else ''} of {list(node.shape)}"


def _loss(node: CNode) -> tuple[LossIR, str]:
    at = node.attrs
    if at.get("size_average") is not None or at.get("reduce") is not None:
        raise NoMatch(f"{node.op} with the deprecated size_average/reduce arguments")
    if node.op == "cross_entropy":
        if at["weight"] is not None or at["label_smoothing"]:
            raise NoMatch("cross_entropy with class weights or label smoothing")
        x = _input(node.args[0], "cross_entropy's logits", dims=2)
        t = _input(at["target"], "cross_entropy's class indices", torch.int64, dims=1)
        ir = LossIR("cross_entropy", (x, t), at["reduction"], ignore_index=at["ignore_index"])
    elif node.op == "kl_div":
        first = node.args[0]
        log = isinstance(first, CNode) and first.op == "log"
        x = _input(first.args[0] if log else first, "kl_div's input")
        t = _input(at["target"], "kl_div's target")
        if node.args[0].shape != at["target"].shape:
            raise NoMatch("kl_div of a target broadcast to the input")
        ir = LossIR("kl_div", (x, t), at["reduction"], log, bool(at["log_target"]))
    else:
        if float(at["p"]) != 2.0 or at["swap"]:
            raise NoMatch("triplet_margin_loss with p other than 2 or swap")
        srcs = (
            (node.args[0], *node.args[1:])
            if "path" in at
            else (node.args[0], at["positive"], at["negative"])
        )
        names = tuple(_input(s, "triplet_margin_loss's inputs") for s in srcs)
        if len({s.shape for s in srcs}) > 1 or len(srcs[0].shape) not in (1, 2):
            raise NoMatch("triplet_margin_loss of inputs broadcast to each other, or not 1-2 d")
        margin = (
            f"float(_attr(self, {at['path']!r}).margin)"
            if "path" in at
            else repr(float(at["margin"]))
        )
        ir = LossIR("triplet", names, at["reduction"], margin=margin, eps=float(at["eps"]))
    if ir.reduction not in ("mean", "sum", "none", "batchmean") or (
        ir.reduction == "none" and ir.kind == "kl_div"
    ):
        raise NoMatch(f"{node.op} with reduction={ir.reduction!r}")
    return ir, f"{node.op} ({ir.reduction}) of {', '.join(ir.sources)}"
