"""The Triton path runs in the interpreter when there is no GPU; set before triton is used."""

import os

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"
