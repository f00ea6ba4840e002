"""Causal multi-head self-attention written out: QKV projection, masked softmax, output projection."""

import math

import torch
import torch.nn as nn

BATCH = 8
SEQ = 1024
D_MODEL = 512
HEADS = 8

HTAM_SMALL = {"BATCH": 2, "SEQ": 19, "D_MODEL": 32, "HEADS": 4}
HTAM_EXTRA = [{"BATCH": 1, "SEQ": 33, "D_MODEL": 24, "HEADS": 2}]


class Model(nn.Module):
    def __init__(self, d_model: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, d_model = x.shape
        head_dim = d_model // self.heads
        q, k, v = self.qkv(x).split(d_model, dim=2)
        q = q.view(batch, seq, self.heads, head_dim).transpose(1, 2)
        k = k.view(batch, seq, self.heads, head_dim).transpose(1, 2)
        v = v.view(batch, seq, self.heads, head_dim).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(head_dim)
        mask = torch.ones(seq, seq, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        out = torch.matmul(torch.softmax(scores, dim=-1), v)
        out = out.transpose(1, 2).contiguous().view(batch, seq, d_model)
        return self.proj(out)


def get_inputs():
    return [torch.randn(BATCH, SEQ, D_MODEL)]


def get_init_inputs():
    return [D_MODEL, HEADS]
