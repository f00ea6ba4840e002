"""Seals: the checksum that ties a slot's bytes to the output a call returned."""

import pytest
import torch

from htam.evaluate import buffers
from htam.evaluate.buffers import DTYPES, seal


def _sum_seal(t: torch.Tensor, key: int) -> int:
    """The GPU's weighted sum, run here on the CPU."""
    return buffers._sum_seal(t.contiguous().reshape(-1).view(torch.uint8), key)


SEALS = [pytest.param(seal, id="cpu_sha256"), pytest.param(_sum_seal, id="gpu_weighted_sum")]


@pytest.mark.parametrize("seal", SEALS)
def test_every_bit_of_every_element_counts(seal):
    x = torch.randn(257, 129)
    base = seal(x, 7)
    for index in (0, 1000, x.numel() - 1):
        for bit in (0, 17, 31):
            y = x.clone().reshape(-1)
            y.view(torch.int32)[index] ^= 1 << bit
            assert seal(y.reshape(x.shape), 7) != base, (index, bit)
    swapped = x.clone().reshape(-1)
    swapped[[3, 4]] = swapped[[4, 3]]
    assert seal(swapped.reshape(x.shape), 7) != base  # positions count, not only values


@pytest.mark.parametrize("seal", SEALS)
def test_logical_order_key_and_dtypes(seal):
    x = torch.randn(40, 50)
    assert buffers.seal(x.t(), 1) == buffers.seal(x.t().contiguous(), 1)  # a transposed output
    assert seal(x, 1) != seal(x, 2)
    assert seal(torch.empty(0), 3) == seal(torch.empty(0, 5), 3)  # no bytes, no error
    for name, dtype in DTYPES.items():
        t = torch.arange(1, 12).to(dtype)
        odd = t[1:]  # an offset and a length no multiple of four bytes
        assert seal(odd, 5) == seal(odd.clone(), 5), name
        changed = odd.clone()
        changed[-1] = 0
        assert seal(changed, 5) != seal(odd, 5), name


def test_more_elements_than_one_pass():
    x = torch.zeros((1 << 24) + 3, dtype=torch.float32)
    base = _sum_seal(x, 11)
    x[-1] = 1.0
    assert _sum_seal(x, 11) != base


def test_lazy_conjugate_and_negative_views_seal_as_their_copies():
    """A candidate returning ``y.conj()`` (or a reference returning ``torch.conj(x)``) was a
    runtime error: such a view has no bytes of its own to read (red team)."""
    z = torch.randn(5, 7, dtype=torch.complex64)
    for view in (z.conj(), torch._neg_view(z), z.conj().imag):
        slot = torch.empty(view.shape, dtype=view.dtype)
        slot.copy_(view)
        assert seal(view, 9) == seal(slot, 9)


def test_the_cpu_hash_reads_blocks_in_an_order_drawn_from_the_key(monkeypatch):
    """Red team 9: hashed front to back, the seal was outrun by a thread still writing the output
    front to back after the call; in the key's order it reads blocks not written yet."""
    seen: list[list[int]] = []

    class Recorder:
        def __init__(self, first: bytes):
            self.starts: list[int] = []
            seen.append(self.starts)

        def update(self, block):
            self.starts.append(int(torch.frombuffer(bytearray(block[:4]), dtype=torch.int32)[0]))

        def digest(self):
            return bytes(32)

    blocks = 16
    x = torch.zeros(blocks, buffers._HASH_BLOCK // 4, dtype=torch.int32)
    x[:, 0] = torch.arange(blocks, dtype=torch.int32)  # each block starts with its index
    monkeypatch.setattr(buffers.hashlib, "sha256", Recorder)
    for key in (1, 2, 3):
        seal(x, key)
    assert all(sorted(order) == list(range(blocks)) for order in seen)  # every block, once
    assert len({tuple(order) for order in seen}) == 3  # a different order for each key
    assert all(order != list(range(blocks)) for order in seen)
