"""2-D convolution, 3x3 kernel, stride 1, padding 1, with bias (NCHW)."""

import torch
import torch.nn as nn

BATCH = 16
IN_CHANNELS = 64
OUT_CHANNELS = 128
HEIGHT = 128
WIDTH = 128
KERNEL = 3

HTAM_SMALL = {"BATCH": 2, "IN_CHANNELS": 3, "OUT_CHANNELS": 5, "HEIGHT": 17, "WIDTH": 19}
HTAM_EXTRA = [{"BATCH": 1, "IN_CHANNELS": 4, "OUT_CHANNELS": 2, "HEIGHT": 9, "WIDTH": 6}]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel, stride=1, padding=kernel // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL]
