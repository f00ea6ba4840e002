"""Pre-norm transformer encoder layer: LayerNorm, attention (SDPA), residual, LayerNorm, MLP, residual."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 8
SEQ = 512
D_MODEL = 512
HEADS = 8
D_HIDDEN = 2048

HTAM_SMALL = {"BATCH": 2, "SEQ": 13, "D_MODEL": 32, "HEADS": 4, "D_HIDDEN": 72}
HTAM_EXTRA = [{"BATCH": 1, "SEQ": 21, "D_MODEL": 48, "HEADS": 3, "D_HIDDEN": 40}]


class Model(nn.Module):
    def __init__(self, d_model: int, heads: int, d_hidden: int):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_model)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, d_model = x.shape
        qkv = self.qkv(x).view(batch, seq, 3, self.heads, d_model // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        out = F.scaled_dot_product_attention(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(batch, seq, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm1(x))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


def get_inputs():
    return [torch.randn(BATCH, SEQ, D_MODEL)]


def get_init_inputs():
    return [D_MODEL, HEADS, D_HIDDEN]
