"""3x3 convolution, batch normalization (inference statistics) and ReLU."""

import torch
import torch.nn as nn

BATCH = 16
IN_CHANNELS = 64
OUT_CHANNELS = 64
HEIGHT = 128
WIDTH = 128

HTAM_SMALL = {"BATCH": 2, "IN_CHANNELS": 3, "OUT_CHANNELS": 6, "HEIGHT": 15, "WIDTH": 17}
HTAM_EXTRA = [{"BATCH": 1, "IN_CHANNELS": 5, "OUT_CHANNELS": 3, "HEIGHT": 8, "WIDTH": 11}]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(out_channels)
        # Fixed, non-trivial running statistics; eval() makes the norm use them, so the output
        # does not depend on the batch and a fused kernel can fold them into the epilogue.
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.2, 0.2)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS]
