"""Output elements float32 cannot pin down are judged against float64: a correct kernel that
sums in another order passes; a wrong one, and the red team's ways around the rule, still fail;
a well-conditioned output is judged as before."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from htam.evaluate.eval_config import TOLERANCES
from htam.evaluate.judge.compare import compare_tensor
from htam.evaluate.judge.exact import judge_against_exact, judge_ill_conditioned
from htam.tasks import load_task

HEAD = "import torch\nimport torch.nn as nn\n\n\n"


def _task(forward: str, inputs: str, init: str = "", args: str = "") -> str:
    return (
        f"{HEAD}class Model(nn.Module):\n    def __init__(self{init}):\n        super().__init__()\n"
        f"{args}\n    def forward(self, x):\n        return {forward}\n\n\n"
        f"def get_inputs():\n    return [{inputs}]\n\n\ndef get_init_inputs():\n"
        f"    return {'[256]' if init else '[]'}\n"
    )


def _candidate(out: str) -> str:
    return (
        f"{HEAD}class ModelNew(nn.Module):\n    def __init__(self, *args):\n"
        f"        super().__init__()\n\n    def forward(self, x):\n"
        f"        y = x - x.mean(dim=1, keepdim=True)\n        return {out}\n"
    )


# The mean of a centred row: exactly 0, so float32's answer is rounding noise (as in KernelBench
# level 2's 23_Conv3d_GroupNorm_Mean, where torch is 7.8% from float64 at the real size).
CENTRED = _task("(x - x.mean(dim=1, keepdim=True)).mean(dim=1)", "torch.randn(64, 4096) + 3.0")
# (task, candidate's output expression, status, what the message or a flag says)
CASES = {
    # torch's error again, in other places
    "centred_blocked": (CENTRED, "y.reshape(64, 64, 64).sum(2).sum(1) / 4096", "ok",
                        "of 64 elements are zero to float32 precision"),  # 63 when a row's
    # float32 mean lands within its float64 value by chance (the inputs come from secrets)
    # the exact answer is 0: a constant near 0 is as right (said in full only when no row's
    # float32 mean lands within its float64 value: see the test of the message below)
    "centred_zeros": (CENTRED, "torch.zeros(64)", "ok", "elements are zero to float32 precision"),
    # which of the two causes is named depends on the float32 order of summation (CI once
    # named the second); either way the wrong constant is incorrect
    "centred_wrong": (CENTRED, "torch.full((64,), 1e-5)", "incorrect",
                      ("within 10x", "not zero to float32 precision")),
    # red team: a reference that overflows to inf where float64 does not
    "inf_zeros": (_task("torch.exp(self.fc(x) * 60.0)", "torch.randn(64, 256)", ", n",
                        "        self.fc = nn.Linear(n, n)"),
                  "torch.zeros(64, 256)", "incorrect", "infinities differ"),
    # red team: well-conditioned values beside one that is exactly 0, in one tensor
    "mixed_lazy": (_task("torch.cat([(x + 1000.0 - (x + 1000.0).mean(1, keepdim=True))[:, :16],"
                         " (x + 1000.0 - (x + 1000.0).mean(1, keepdim=True)).sum(1, keepdim=True)"
                         "], dim=1)", "torch.randn(64, 4096)"),
                   "torch.cat([x[:, :16] - x[:, :256].mean(1, keepdim=True), "
                   "torch.zeros(64, 1)], dim=1)", "incorrect", "not zero to float32 precision"),
    # red team: weights drawn on the first call, by the float64 run in its own way
    "lazy_linear_zeros": (_task("self.fc(x)", "torch.randn(64, 256)", ", n",
                                "        self.fc = nn.LazyLinear(n)"),
                          "torch.zeros(64, 256)", "incorrect", "elements outside atol"),
    # red team: nn.RMSNorm's default eps follows the dtype, so float64 is another function
    "rmsnorm_eps_zeros": (_task("self.norm(x * 1e-4)", "torch.randn(64, 256)", ", n",
                                "        self.norm = nn.RMSNorm(n)"),
                          "torch.zeros_like(x)", "incorrect", "elements outside atol"),
}  # fmt: skip


# Each case is one evaluation (seconds on 2 cores): the fast tier keeps one of each verdict and
# of each kind of output, the slow tests the other near-zero variants.
SLOW_CASES = {"mixed_lazy", "lazy_linear_zeros", "rmsnorm_eps_zeros"}


@pytest.mark.parametrize(
    "case", [pytest.param(c, marks=pytest.mark.slow) if c in SLOW_CASES else c for c in CASES]
)
def test_float64_second_opinion(cpu_evaluator, tmp_path, case):
    source, out, status, says = CASES[case]
    path = tmp_path / f"{case}.py"
    path.write_text(source)
    result = cpu_evaluator.evaluate(load_task(path), _candidate(out), "cpp", allow_torch=True)
    assert result.status == status, (result.messages, result.flags)
    text = " ".join(result.messages + result.flags)
    assert any(s in text for s in ((says,) if isinstance(says, str) else says)), text


LAZY_AFTER_TRIALS = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls <= 3:  # the correctness trials: the reference's own masks
            return torch.nn.functional.dropout(x, 0.5, True).mean(dim=1)
        return x.mean(dim=1)  # the timed calls: no dropout at all
"""


@pytest.mark.slow
def test_a_random_output_is_not_taken_for_rounding_noise(cpu_evaluator, tmp_path):
    """Dropout in training mode: after the trials the reference's random stream has moved on, so
    a float64 run draws other masks and its distance from the float32 reference is chance, not
    rounding. Taken for rounding noise, it let a candidate drop the dropout once the trials were
    over (ok, 10x of chance); the verdict stands instead."""
    path = tmp_path / "dropout_mean.py"
    path.write_text(CENTRED.replace("(x - x.mean(dim=1, keepdim=True)).mean(dim=1)",
                                    "torch.nn.functional.dropout(x, 0.5, True).mean(dim=1)"))  # fmt: skip
    result = cpu_evaluator.evaluate(load_task(path), LAZY_AFTER_TRIALS, "cpp", allow_torch=True)
    assert result.status == "incorrect", (result.status, result.flags)
    # the first call after the trials is the one on shifted inputs (shifted.py) or a timed one
    where = ("the trial on scaled and shifted inputs", "timed call")
    assert result.messages[0].startswith(where) and "float64" not in result.messages[0]


def test_a_well_conditioned_output_keeps_the_float32_verdict():
    tol = TOLERANCES["float32"]
    ref = torch.randn(1000, dtype=torch.float32)
    out = ref + 0.01 * torch.randn(1000)
    assert judge_against_exact(out, ref, ref.clone(), ref.double(), tol) == (False, "")
    # not the reference's function (the judge's own float32 run differs): no second opinion
    assert judge_against_exact(out, ref, ref + 1.0, ref.double(), tol) == (False, "")


def test_an_output_all_zero_to_float32_precision_says_a_constant_passes():
    tol = TOLERANCES["float32"]
    exact = torch.full((64,), 1e-9, dtype=torch.float64)
    ref = (exact + torch.linspace(-1e-7, 1e-7, 64, dtype=torch.float64)).float()
    ok, why = judge_against_exact(torch.zeros(64), ref, ref.clone(), exact, tol)
    assert ok and why.startswith("64 of 64 elements are zero to float32 precision")
    assert why.endswith("so a constant near 0 passes too")
    ok, why = judge_against_exact(torch.full((64,), 1e-3), ref, ref.clone(), exact, tol)
    assert not ok and "within 10x" in why


def _noisy(exact: torch.Tensor, rel: float, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    noise = torch.randn(exact.shape, generator=g, dtype=torch.float64)
    return (exact + rel * noise * exact.norm() / noise.norm()).float()


def test_an_ill_conditioned_reference_judges_against_float64_within_its_own_error():
    """A deep TF32 network's reference is 7.8e-2 from float64 (ResNet101 on an H100): another
    honest order of the same sums is as far, and passes; zeros, a stateful model's run and a
    reference too far to carry the answer do not."""
    tol = TOLERANCES["float32"]
    exact = torch.randn(10_000, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    ref = _noisy(exact, 0.078, 1)
    honest = _noisy(exact, 0.085, 2)
    assert compare_tensor(honest, ref, {"float32": tol})  # fails the float32 tolerance
    ok, why = judge_ill_conditioned(honest, ref, ref.clone(), exact, tol)
    assert ok and "the reference itself is 7.80e-02 from float64" in why and "within 3x" in why
    ok, why = judge_ill_conditioned(torch.zeros_like(ref), ref, ref.clone(), exact, tol)
    assert not ok and "the candidate 1.00e+00" in why
    assert not judge_ill_conditioned(_noisy(exact, 0.3, 3), ref, ref.clone(), exact, tol)[0]
    # the judge's own float32 run is not the reference's function: no second opinion
    assert judge_ill_conditioned(honest, ref, ref + 5.0, exact, tol) == (False, "")
    # a well-conditioned reference keeps the float32 verdict
    tight = _noisy(exact, 1e-7, 4)
    assert judge_ill_conditioned(honest, tight, tight.clone(), exact, tol) == (False, "")
    # a reference 0.8 from float64 (EfficientNet-B2 at its real size): zeros would be within 3x
    lost = _noisy(exact, 0.8, 5)
    ok, why = judge_ill_conditioned(torch.zeros_like(ref), lost, lost.clone(), exact, tol)
    assert not ok and "too far to judge by" in why


REDTEAM12 = Path(__file__).parent / "fixtures"


@pytest.mark.slow
def test_one_cancelling_sum_does_not_excuse_the_rest_of_the_output():
    """Red team 12: a centred row's sum (exactly 0, float32 noise near 1e-3) beside a softmax
    whose values are all below that noise. Float32's worst rounding in the output excused every
    softmax element, and an answer of all zeros passed (ok, 2.4x: the softmax never computed).
    The slack is for the few zeros float32 hit by chance, never for more elements than the
    zeros themselves."""
    tol = TOLERANCES["float32"]
    torch.manual_seed(0)
    x = torch.randn(64, 1 << 16)
    ref = torch.cat([(x - x.mean(1, keepdim=True)).sum(1), torch.softmax(x, 1).reshape(-1)])
    xd = x.double()
    exact = torch.cat([(xd - xd.mean(1, keepdim=True)).sum(1), torch.softmax(xd, 1).reshape(-1)])
    ok, why = judge_against_exact(torch.zeros_like(ref), ref, ref.clone(), exact, tol)
    assert not ok and "not zero to float32 precision" in why


@pytest.mark.slow
def test_cheat_exact_slack_fixture_is_incorrect(cpu_evaluator):
    task = load_task(REDTEAM12 / "cancel_softmax_task.py")
    source = (REDTEAM12 / "cheat_exact_slack.py").read_text()
    result = cpu_evaluator.evaluate(task, source, "cpp")
    assert result.status == "incorrect", (result.status, result.messages, result.flags)


PEAK_SCRIPT = """
import sys, types, torch
from htam.evaluate.judge import exact
from htam.evaluate.eval_config import TOLERANCES

torch.set_num_threads(1)
n, body, wrong = 1 << 22, sys.argv[1], sys.argv[2]
mod = types.ModuleType("task")
exec("import torch\\nclass Model(torch.nn.Module):\\n    def forward(self, x):\\n"
     f"        return {body}\\n", mod.__dict__)


def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) << 10


def reset():
    open("/proc/self/clear_refs", "w").write("5")


x = torch.randn(n)
ref = mod.Model()(x)
out = eval(wrong)
counted, count = [], exact.working_bytes
exact.working_bytes = lambda *a: counted.append(count(*a)) or counted[-1]
reset()
base = status("VmRSS:")
runs = exact.reference_runs(mod, [], 0, "cpu", [x], [ref], 1 << 40)
ran = status("VmHWM:") - base
reset()
tol = TOLERANCES["float32"]
ok, why = exact.judge_against_exact(out, ref, runs[0][0], runs[1][0], tol)
exact.judge_ill_conditioned(out, ref, runs[0][0], runs[1][0], tol)  # as the judge does next
judged = status("VmHWM:") - base
print(counted[-1], ran, judged, len(why))
"""

# (the reference, a wrong answer whose comparison reaches the second opinion)
PEAK_CASES = {
    # no intermediates; no element zero to float32 precision (ReLU, red team 16: 1.93x)
    "relu": ("torch.relu(x)", "ref + 1.0"),
    # half the elements zero to float32 precision, the others compacted for the float32
    # verdict; the model's own intermediates in float64 (an index, a mask, three sums)
    "half_zero": (
        "torch.where(torch.arange(x.numel()) % 2 == 0, x, (x + 1000.0) - 1000.0 - x)",
        "torch.where(ref.abs() < 1e-2, 0.0, ref)",
    ),
}


@pytest.mark.parametrize("case", PEAK_CASES)
def test_the_second_opinion_holds_no_more_than_its_budget_counts(case):
    """The float64 second opinion's working set, measured (the process's peak resident set over
    the float64 runs, then over the comparison), is within what ``working_bytes`` counts, which
    ``byte_budget`` bounds. It held 1.93x the count on a ReLU before the count took in the
    float32 run, both float64 runs and the comparison's temporaries."""
    body, wrong = PEAK_CASES[case]
    done = subprocess.run(
        [sys.executable, "-c", PEAK_SCRIPT, body, wrong],
        capture_output=True, text=True, timeout=300, check=True,
        # every large block its own mapping, returned when freed (glibc's threshold otherwise
        # grows to 32 MB, and freed blocks below it stay resident)
        env={**os.environ, "OMP_NUM_THREADS": "1", "MALLOC_MMAP_THRESHOLD_": "65536"},
    )  # fmt: skip
    counted, ran, judged, why = (int(v) for v in done.stdout.split())
    slack = counted // 50 + (8 << 20)  # the interpreter's and allocator's own pages
    assert ran <= counted + slack, f"the float64 runs held {ran / counted:.2f}x the count"
    assert judged <= counted + slack, f"the comparison held {judged / counted:.2f}x the count"
    assert max(ran, judged) >= counted // 2, "the count is far from what it holds"
    assert case == "relu" or why > 0  # the comparison went as far as the compacted elements
