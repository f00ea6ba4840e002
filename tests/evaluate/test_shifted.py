"""The judge's shifted inputs (shifted.py, needles.py) drawn from the operating system's
generator, and a backward task's shift (its grad_outputs left as drawn)."""

import types

import pytest
import torch
import torch.nn as nn

from htam.evaluate.judge import needles, shifted


def test_the_draws_do_not_follow_any_seed():
    """Red team 7: one torch generator seeded per job keeps 32 bits of its seed, recoverable
    from the untimed trial's outliers, and then tells every timed call's shift and outliers."""
    x = torch.rand(64, 64)
    draws = []
    for _ in range(2):
        torch.manual_seed(0)
        planted = needles.plant([x.clone()], 1e3)[0]
        draws.append((shifted._params([x], False), torch.nonzero(planted != x).tolist()))
    assert draws[0][0] != draws[1][0]
    assert draws[0][1] != draws[1][1]
    assert len(draws[0][1]) == needles.PLANTED


class _Mean(nn.Module):
    def forward(self, x):
        return torch.mean(x)


def test_a_backward_tasks_shift_moves_the_inputs_and_not_the_grad_outputs():
    module = types.SimpleNamespace(Model=_Mean)
    x, grad = torch.rand(64, 64), torch.randn(())
    shifter = shifted.Shifter(module, [], 0, "cpu", grads=1)
    moved = shifter.first(lambda: [x.clone(), grad])
    assert moved is not None and moved[1] is grad
    assert not torch.equal(moved[0], x)
    # the judge's copy took the whole step: its outputs are the mean and its gradient
    assert [b[0] for b in shifter.base] == [torch.Size([]), torch.Size([64, 64])]


class _Hinge(nn.Module):
    def forward(self, predictions, targets):
        return torch.mean(torch.clamp(1 - predictions * targets, min=0))


@pytest.mark.slow
def test_every_job_of_a_hinge_loss_plants_outliers():
    """CI, stop 34: a job's outliers were calibrated on one shift, and where it moved the
    predictions and the targets to the same sign, the clamp took every outlier in: one job in
    25 planted none, and a mean over every other row passed it. Each of 60 jobs plants some."""
    module = types.SimpleNamespace(Model=_Hinge)
    unplanted = 0
    for _ in range(60):

        def draw():
            return [torch.rand(256, 256), torch.randint(0, 2, (256,)).float() * 2 - 1]

        shifter = shifted.Shifter(module, [], 0, "cpu")
        assert shifter.first(draw) is not None
        unplanted += shifter.scale is None
    assert unplanted == 0


def test_a_shift_in_place_moves_the_tensor_itself_to_the_same_values():
    """In place (a large task's inputs held once, footprint.py), a slice at a time, the values
    are the new tensor's to the bit; an input sharing memory with another is moved into a new
    tensor (each of the two is moved once)."""
    x = torch.randn(3 * shifted.CHUNK // 2 + 5)
    x[::7] = 0.0
    expected = shifted._moved(x, 1.7, 0.3)
    moved = shifted._moved(x, 1.7, 0.3, in_place=True)
    assert moved is x and torch.equal(moved, expected)
    shifter = shifted.Shifter(types.SimpleNamespace(Model=_Hinge), [], 0, "cpu")
    shifter.model, shifter.mild, y = _Hinge(), True, torch.rand(64)
    shifter.base = [(torch.Size([]), True)]  # what ``first`` learns: a finite scalar
    pair = [y, y]
    assert shifter.next(pair, in_place=True) is pair
    assert pair[0] is not y and pair[1] is not y  # shared memory: new tensors


def test_finiteness_is_checked_a_slice_at_a_time():
    x = torch.zeros(shifted.CHUNK + 3)
    assert shifted.all_finite(x)
    x[-1] = float("nan")
    assert not shifted.all_finite(x)
    assert not shifted.all_finite(x[::2].clone().fill_(float("inf"))[:4])
