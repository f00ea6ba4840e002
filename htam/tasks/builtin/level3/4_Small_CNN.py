"""A small image classifier: two conv-BN-ReLU-maxpool stages, global average pool, linear head."""

import torch
import torch.nn as nn

BATCH = 64
CHANNELS = 3
IMAGE = 128
WIDTH = 64
CLASSES = 100

HTAM_SMALL = {"BATCH": 2, "IMAGE": 18, "WIDTH": 8, "CLASSES": 10}
HTAM_EXTRA = [{"BATCH": 3, "IMAGE": 13, "WIDTH": 4, "CLASSES": 7}]


def stage(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(),
        nn.MaxPool2d(2),
    )


class Model(nn.Module):
    def __init__(self, channels: int, width: int, classes: int):
        super().__init__()
        self.features = nn.Sequential(stage(channels, width), stage(width, 2 * width))
        self.head = nn.Linear(2 * width, classes)
        self.eval()  # batch norm uses its running statistics: the output is per-sample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        return self.head(torch.flatten(x.mean(dim=(2, 3)), 1))


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, IMAGE, IMAGE)]


def get_init_inputs():
    return [CHANNELS, WIDTH, CLASSES]
