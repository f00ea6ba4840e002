"""The correctness rule on its own: tolerances, non-finite values, slices, no side effects."""

from pathlib import Path

import pytest
import torch

from htam.evaluate.eval_config import TOLERANCES
from htam.evaluate.judge import compare
from htam.evaluate.judge.compare import compare_outputs, compare_tensor, narrowed
from htam.tasks import load_task

BIG = 3 * compare._SLICE + 123  # several slices and a ragged last one


def _ref(n=BIG, seed=0):
    return torch.randn(n, generator=torch.Generator().manual_seed(seed))


def test_noise_within_tolerance_passes_and_the_reference_is_untouched():
    ref = _ref()
    before = ref.clone()
    out = ref + 1e-5 * _ref(seed=1)
    assert compare_tensor(out, ref, TOLERANCES) is None
    assert torch.equal(ref, before)


def test_one_wrong_element_in_a_later_slice_is_found_at_its_index():
    ref = _ref()
    out = ref.clone()
    out[2 * compare._SLICE + 7] += 1.0
    message = compare_tensor(out, ref, TOLERANCES)
    assert message.startswith(f"1 of {BIG} elements outside")
    assert f"at flat index {2 * compare._SLICE + 7}" in message


def test_near_zero_output_fails_on_a_task_whose_output_is_tiny():
    ref = 1e-4 * _ref(1000)
    message = compare_tensor(torch.zeros_like(ref), ref, TOLERANCES)
    assert message is not None and "outside" in message


@pytest.mark.parametrize("scale", [1e-23, 1e-30, 1e-40])
def test_zeros_fail_on_outputs_whose_squares_underflow_float32(scale):
    """The relative L2 rule is what fails a near-zero answer where the elementwise floor
    (1e-6) admits anything; its squared errors summed in float32 underflowed to 0 on outputs
    below about 1e-22, and an answer of zeros passed (red team 18)."""
    ref = _ref(4096) * scale
    assert "relative L2 error 1.000e+00" in compare_tensor(torch.zeros_like(ref), ref, TOLERANCES)
    assert "relative L2 error" in compare_tensor(ref * 1.01, ref, TOLERANCES)
    if scale > 1e-38:  # (float32 denormals below: 1.01x of one is rounded away)
        assert compare_tensor(ref * 1.0001, ref, TOLERANCES) is None


def test_a_close_answer_on_huge_outputs_passes():
    """Squares above float32's range overflowed to infinity: a 1e-4 answer on outputs of 1e30
    failed its relative L2 error."""
    ref = _ref(4096) * 1e30
    assert compare_tensor(ref * 1.0001, ref, TOLERANCES) is None
    assert compare_tensor(ref * 1.01, ref, TOLERANCES) is not None


def test_non_finite_values():
    ref = _ref(1000)
    out = ref.clone()
    out[10] = float("nan")
    said = compare_tensor(out, ref, TOLERANCES)
    assert said.startswith("NaN or infinity where the reference is finite; first differing: ")
    assert "at [10] got nan" in said
    ref_nan = ref.clone()
    ref_nan[3] = float("nan")
    both = ref_nan.clone()
    assert compare_tensor(both, ref_nan, TOLERANCES) is None
    assert "NaNs" in compare_tensor(ref.clone(), ref_nan, TOLERANCES)


def test_integers_shapes_dtypes_and_trial_structure():
    idx = torch.arange(10)
    assert compare_tensor(idx.clone(), idx, TOLERANCES) is None
    wrong = idx.clone()
    wrong[0] = 5
    assert compare_tensor(wrong, idx, TOLERANCES).startswith("1 of 10 elements differ (exact")
    assert compare_tensor(torch.zeros(3, 2), torch.zeros(2, 3), TOLERANCES).startswith("shape")
    assert compare_tensor(torch.zeros(3).double(), torch.zeros(3), TOLERANCES).startswith("dtype")
    assert compare_outputs([[idx]], [[idx], [idx]]) == "1 trial results for 2 trials"


def test_bfloat16_uses_its_own_tolerance():
    ref = _ref(4096).bfloat16()
    out = (ref.float() * 1.004).bfloat16()  # within bf16's 2e-2, far outside float32's 5e-3
    assert compare_tensor(out, ref, TOLERANCES) is None
    assert compare_tensor(out.float(), ref.float(), TOLERANCES) is not None


def test_a_slot_refilled_in_place_is_judged_by_its_current_values():
    """The judge's reference slots are refilled in place between calls (red team): the norm and
    the finite flag must come from the values compared now, not from the slot's first call."""
    slot = _ref(1000) * 100
    assert compare_tensor(slot.clone(), slot, TOLERANCES) is None
    slot.copy_(_ref(1000, seed=1))  # a later call: outputs 100x smaller
    assert compare_tensor(slot + 0.15, slot, TOLERANCES) is not None  # passed on stale stats
    assert compare._reference_stats(slot)[0] < 100
    slot[3] = float("inf")  # a later call with an infinity, answered honestly
    assert compare_tensor(slot.clone(), slot, TOLERANCES) is None


def test_a_float32_answer_held_in_16_bits_is_told_apart():
    """compare.narrowed (red team 10: a float16 answer made float32 in the hand-over)."""
    g = torch.Generator().manual_seed(0)
    ref = torch.relu(torch.randn(10_000))
    assert narrowed(ref.clone(), ref, g) is None
    why = narrowed(ref.half().float(), ref, g)
    assert why and "float16" in why
    # bfloat16 values are float16 values too where float16 reaches: one message for both
    assert narrowed(ref.bfloat16().float(), ref, g)
    # one element in 32 nudged off its float16 value (red team 11): the share still shows
    sprinkled = ref.half().float()
    sprinkled[::32] *= 1.0 + 2.0**-20
    assert narrowed(sprinkled, ref, g)
    # a reference partly of 16-bit values (clamped at 1): as many in the answer is no evidence,
    # all of them is
    clamped = ref.clamp(max=1.0)
    assert narrowed(clamped.clone(), clamped, g) is None
    assert narrowed(clamped.half().float(), clamped, g)
    # zeros where the reference has float32 noise, and integer-valued answers: no evidence
    assert narrowed(torch.zeros(10_000), torch.randn(10_000) * 1e-9, g) is None
    whole = torch.randint(-50, 50, (10_000,)).float()  # float16 holds each of them
    assert narrowed(whole.clone(), whole, g) is None


def test_a_mostly_zero_answer_held_in_16_bits_is_told_apart():
    """Red team 12 (fixtures/attack_sparse_float16.py): a ReLU of the inputs less 3 is 99.9%
    zeros, so a draw of 4,096 elements held a handful of nonzero ones, taken as no evidence,
    and a float16 answer through the hand-over passed. The draw is now taken again from the
    nonzero elements; an honest sparse answer still passes."""
    g = torch.Generator().manual_seed(0)
    ref = torch.relu(torch.randn(1 << 20) - 3.0)
    assert float((ref != 0).float().mean()) < 0.002
    assert narrowed(ref.clone(), ref, g) is None
    why = narrowed(ref.half().float(), ref, g)
    assert why and "float16" in why
    few = torch.zeros(1 << 20)
    few[:10] = torch.rand(10).half().float()  # too few nonzero elements to say anything
    assert narrowed(few, few.clone() + 1e-9 * (few != 0), g) is None


@pytest.mark.slow
def test_attack_sparse_float16_is_rejected(cpu_evaluator):
    folder = Path(__file__).parent / "fixtures"
    task = load_task(folder / "sparse_relu_task.py")
    result = cpu_evaluator.evaluate(task, (folder / "attack_sparse_float16.py").read_text(), "cpp")
    assert result.status == "rejected", (result.status, result.messages)
    assert "float16 values" in result.messages[0]
    honest = cpu_evaluator.evaluate(task, (folder / "honest_sparse_float32.py").read_text(), "cpp")
    assert honest.status == "ok", honest.messages
