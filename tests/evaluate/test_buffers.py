"""Seals: the checksum that ties a slot's bytes to the output a call returned."""

import pytest
import torch

from htam.evaluate.buffers import DTYPES, seal


def test_every_bit_of_every_element_counts():
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


def test_logical_order_key_and_dtypes():
    x = torch.randn(40, 50)
    assert seal(x.t(), 1) == seal(x.t().contiguous(), 1)  # a transposed output and its copy
    assert seal(x, 1) != seal(x, 2)
    assert seal(torch.empty(0), 3) == 0
    for name, dtype in DTYPES.items():
        t = torch.arange(1, 12).to(dtype)
        odd = t[1:]  # an offset and a length no multiple of four bytes
        assert seal(odd, 5) == seal(odd.clone(), 5), name
        changed = odd.clone()
        changed[-1] = 0
        assert seal(changed, 5) != seal(odd, 5), name


@pytest.mark.parametrize("n", [(1 << 24) + 3])
def test_more_elements_than_one_pass(n):
    x = torch.zeros(n, dtype=torch.float32)
    base = seal(x, 11)
    x[-1] = 1.0
    assert seal(x, 11) != base
