"""The channel-norm family follows the module at run time: BatchNorm's running statistics are
updated as torch updates them in training mode, and GroupNorm without affine parameters (an
init value the solution was not written for) needs no new code."""

import torch

from tests.offline.harness import load_solution, solution, task_of
from tests.offline.sources_norm import NORM_BATCH_2D, NORM_GROUP


def _model(source: str, init: list):
    ns: dict = {}
    exec(compile(source, "<ref>", "exec"), ns)  # noqa: S102
    torch.manual_seed(0)
    return ns["Model"](*init)


def test_batch_norm_updates_the_running_statistics_like_torch():
    module = load_solution(solution(task_of("norm_batch_2d", NORM_BATCH_2D), "triton"))
    ref = _model(NORM_BATCH_2D, [3])
    torch.manual_seed(0)
    new = module.ModelNew(3)
    for _ in range(2):
        x = torch.randn(4, 3, 5, 7) * 3.0 + 1.0
        with torch.no_grad():
            assert torch.allclose(new(x), ref(x), atol=1e-5)
    bn, ours = ref.bn, new.bn
    assert torch.allclose(ours.running_mean, bn.running_mean, atol=1e-6)
    assert torch.allclose(ours.running_var, bn.running_var, atol=1e-5)
    assert ours.num_batches_tracked.item() == bn.num_batches_tracked.item() == 2


def test_group_norm_follows_its_init_values():
    module = load_solution(solution(task_of("norm_group", NORM_GROUP), "triton"))
    x = torch.randn(2, 6, 33)
    for init in ([3, True], [2, False], [6, True]):
        ref = _model(NORM_GROUP, init)
        torch.manual_seed(0)
        got = module.ModelNew(*init)(x)
        assert torch.allclose(got, ref(x), atol=1e-5), init
