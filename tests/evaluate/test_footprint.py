"""An evaluation's GPU memory as a multiple of the task's tensor bytes: which tasks are named
too big for a card before any candidate runs, and when an out-of-memory is the evaluator's."""

from htam.evaluate import footprint

GIB = 2**30
H100 = int(79.2 * GIB)


def test_kernelbench_largest_tasks_on_an_80_gb_card_as_the_h100_measured_them():
    # KernelBench's largest (scripts/device/kb_tensor_bytes.py), judged on an H100 80GB with an
    # honest candidate (scripts/device/gpu_memory.py): 34_InstanceNorm, 35_GroupNorm_ and
    # 36_RMSNorm_ (14 GiB) and 19_ReLU (12 GiB) were judged `ok`
    for tensor_gib in (14.0, 12.0):
        assert footprint.too_big(int(tensor_gib * GIB), H100) is None
    # 45_Average_Pooling_2D (16.13 GiB), 38_L1Norm_ and 39_L2Norm_ (16 GiB) ran out of memory
    # beside it: named before any candidate runs
    for tensor_gib in (16.13, 16.0):
        assert footprint.too_big(int(tensor_gib * GIB), H100) is not None


def test_a_task_beyond_the_card_is_named_with_its_figures():
    why = footprint.too_big(20 * GIB, H100)
    assert why is not None and "too big for this card" in why
    assert "20.0 GiB of tensors" in why and "79.2 GiB" in why
    assert footprint.too_big(20 * GIB, 0) is None  # no card size known (the CPU): no refusal


def test_an_oom_is_the_evaluators_only_where_its_own_share_takes_most_of_the_card():
    assert footprint.is_gpu_oom("GPU out of memory (1.3 of 79.2 GiB free): CUDA out of memory")
    assert not footprint.is_gpu_oom("illegal memory access")
    assert footprint.crowds(14 * GIB, H100)  # InstanceNorm: 3.5 x 14 GiB of 79 GiB
    # a small task's OOM beside a candidate stays the candidate's (red team 4's memory holder)
    assert not footprint.crowds(100 << 20, H100)
    assert not footprint.crowds(14 * GIB, 0)
    cause = footprint.crowded_cause(14 * GIB, H100, "CUDA out of memory")
    assert cause.endswith(": CUDA out of memory") and "3.5x the task's 14.0 GiB" in cause
