"""Deep training-mode batch-normed networks: the whole-model candidate's own batch norm (shifted
moments, docs/offline.md "Deep batch-normed networks") adds no more error than float32 rounding
does, however many layers the error crosses.

What makes level 3's ResNet101 (and MobileNetV1/V2, EfficientNetB0/B2, UNetSoftmax)
`incorrect` on a GPU is not these kernels: cuDNN runs the float32 convolutions of reference and
candidate alike in TF32 (``torch.backends.cudnn.allow_tf32`` is on by default), and over those
depths the reference's own output then moves beyond the evaluator's tolerance when its input
moves by one ulp (B2 and UNetSoftmax: in IEEE float32 too). Any candidate that is not bit for bit
the reference lands elsewhere in that noise. The GPU test measures both:
with IEEE convolutions the candidate must pass the evaluator's comparison (B2 and UNetSoftmax:
printed only); with TF32 the verdicts are printed beside the reference's own nudged run.

    pytest -m gpu tests/offline/test_batch_norm_depth.py -s      # KB_ROOT: KernelBench's tasks
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import torch

from htam.evaluate.eval_config import TOLERANCES
from htam.evaluate.judge.compare import compare_tensor
from htam.tasks.module import load_task_module
from tests.offline.harness import load_solution, solution, task_of, time_ms

# A ResNet bottleneck stack (72 training-mode batch norms) whose first convolution has no
# padding and reads inputs near 100: its channels' means are ~300x their spread, so moments
# taken as plain sums of x and x^2 cancel (relative L2 error 2.3e-2 against the reference,
# beyond the 2e-3 bound) where shifted ones do not (1.6e-5).
DEEP_BOTTLENECKS = """
import torch
import torch.nn as nn


class Bottleneck(nn.Module):
    def __init__(self, channels, width):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, width, kernel_size=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, kernel_size=3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, channels, kernel_size=1, bias=False)
        self.bn3 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        out += identity
        out = self.relu(out)
        return out


class Model(nn.Module):
    def __init__(self, blocks, channels, width, num_classes):
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, kernel_size=3, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU(inplace=True)
        self.layers = nn.Sequential(*[Bottleneck(channels, width) for _ in range(blocks)])
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(channels, num_classes)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layers(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.fc(x)


blocks = 24
channels = 16
width = 8
num_classes = 10
batch_size = 4


def get_inputs():
    return [torch.rand(batch_size, 3, 16, 16) + 100.0]


def get_init_inputs():
    return [blocks, channels, width, num_classes]
"""


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).double().norm() / b.double().norm())


def _nudged(x: torch.Tensor) -> torch.Tensor:
    """``x`` one ulp up, every element: the smallest change float32 can make to the input."""
    return torch.nextafter(x, torch.full_like(x, float("inf")))


def _three_runs(source: str, size: str, device: str):
    """(reference, candidate, reference on the nudged input) outputs, same seeds as the
    evaluator uses (parameters from seed 0, inputs from seed 1), and the two models."""
    ref_mod = load_task_module(source, size, name="htam_depth_ref")
    sol = load_solution(solution(task_of("depth", source), "triton"))
    init = ref_mod.get_init_inputs()
    torch.manual_seed(0)
    ref = ref_mod.Model(*init).to(device)
    torch.manual_seed(0)
    new = sol.ModelNew(*init).to(device)
    torch.manual_seed(1)
    inputs = [x.to(device) for x in ref_mod.get_inputs()]
    with torch.no_grad():
        want = ref(*[x.clone() for x in inputs])
        got = new(*[x.clone() for x in inputs])
        nudged = ref(*[_nudged(x) for x in inputs])
    return want, got, nudged, (ref, new, inputs)


@pytest.mark.slow
def test_deep_batch_norm_stack_adds_only_rounding():
    if torch.cuda.is_available():
        pytest.skip("a CPU test (the Triton interpreter); the GPU one is below")
    os.environ.setdefault("TRITON_INTERPRET", "1")
    want, got, nudged, _ = _three_runs(DEEP_BOTTLENECKS, "small", "cpu")
    assert compare_tensor(got, want, TOLERANCES) is None
    # no further from the reference than the reference is from itself one ulp away
    assert _rel(got, want) <= 4 * _rel(nudged, want), (_rel(got, want), _rel(nudged, want))


KB = Path(os.environ.get("KB_ROOT", "/work/shared/kernelbench/KernelBench"))
# level 3's networks with training-mode batch norms that the CPU emulation of TF32 found
# ill-conditioned (10, 19, 20, 22) and two that are not (9, 15): with IEEE convolutions each is
# well conditioned, and the candidate must pass the evaluator's comparison
GPU_MODELS = ["10_ResNet101", "19_MobileNetV1", "20_MobileNetV2", "22_EfficientNetB0",
              "9_ResNet18", "15_DenseNet121"]  # fmt: skip
# ill-conditioned in IEEE float32 too (the reference one ulp away fails against itself): printed
IEEE_NOISE = ["24_EfficientNetB2", "45_UNetSoftmax"]


@pytest.mark.gpu
@pytest.mark.skipif(not KB.is_dir(), reason="KernelBench is not here (set KB_ROOT)")
@pytest.mark.parametrize("stem", GPU_MODELS + IEEE_NOISE)
def test_kernelbench_deep_batch_norm_at_full_size_on_gpu(stem):
    source = (KB / "level3" / f"{stem}.py").read_text()
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        want, got, nudged, (ref, new, inputs) = _three_runs(source, "large", "cuda")
    ieee = compare_tensor(got, want, TOLERANCES)
    print(f"\n{stem} IEEE convolutions: candidate {ieee or 'ok'} (rel L2 {_rel(got, want):.2e});"
          f"\n  reference one ulp away: {compare_tensor(nudged, want, TOLERANCES) or 'ok'} "
          f"(rel L2 {_rel(nudged, want):.2e})")  # fmt: skip
    with torch.no_grad():  # cuDNN's default: TF32, as the evaluator's reference runs
        tf_want, tf_got = ref(*[x.clone() for x in inputs]), new(*[x.clone() for x in inputs])
        tf_again = ref(*[x.clone() for x in inputs])
        tf_nudged = ref(*[_nudged(x) for x in inputs])
    print(f"{stem} TF32 convolutions: candidate {compare_tensor(tf_got, tf_want, TOLERANCES) or 'ok'}"
          f"\n  reference one ulp away: {compare_tensor(tf_nudged, tf_want, TOLERANCES) or 'ok'}"
          f"\n  reference again, same input: bitwise {torch.equal(tf_again, tf_want)}; TF32 "
          f"reference against IEEE: {compare_tensor(tf_want, want, TOLERANCES) or 'ok'}")  # fmt: skip
    eager, ours = time_ms(ref, inputs), time_ms(new, inputs)
    print(f"{stem} eager {eager:.3f} ms ({_host_ms(ref, inputs):.3f} ms to issue), candidate "
          f"{ours:.3f} ms ({_host_ms(new, inputs):.3f} ms to issue): {eager / ours:.2f}x")  # fmt: skip
    assert stem in IEEE_NOISE or ieee is None, ieee


def _host_ms(model, inputs, reps: int = 10) -> float:
    """Host milliseconds to issue one forward, the GPU idle at its start (one forward's launches
    fit the launch queue): at or above the CUDA time, the forward waits on Python and launch
    overhead, not on the GPU."""
    times = []
    with torch.no_grad():
        for _ in range(reps + 1):  # the first is a warm-up
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            model(*inputs)
            times.append(time.perf_counter() - t0)
        torch.cuda.synchronize()
    return sum(times[1:]) * 1e3 / reps
