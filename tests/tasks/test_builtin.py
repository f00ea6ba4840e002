"""The built-in suite: composition, stable ids, and every task running at every size."""

from collections import Counter
from pathlib import Path

import torch

from htam.tasks import instantiate, load_suite, load_task, num_extra
from htam.tasks.loader import BUILTIN_DIR


def _outputs(task, extra=None, seed=0):
    model, inputs = instantiate(task, "small", extra=extra, seed=seed)
    with torch.no_grad():
        out = model(*inputs)
    return inputs, (out if isinstance(out, tuple) else (out,))


def test_suite_composition(suite):
    levels = Counter(task.level for task in suite)
    assert len(suite) == 29
    assert levels == {1: 15, 2: 10, 3: 4}
    assert all(task.path is not None and task.path.is_file() for task in suite)


def test_ids_are_unique_stable_and_kernelbench_named(suite):
    ids = [task.id for task in suite]
    assert len(set(ids)) == len(ids)
    assert ids[:3] == ["builtin/level1/1_ReLU", "builtin/level1/2_GELU", "builtin/level1/3_Sigmoid"]
    assert "builtin/level2/1_Gemm_Bias_ReLU" in ids
    assert "builtin/level3/3_Transformer_Layer" in ids
    # Loading a file directly, by a relative-looking path, gives the same id and digest.
    again = load_task(BUILTIN_DIR / "level1" / "6_Softmax.py")
    original = next(t for t in suite if t.name == "6_Softmax")
    assert (again.id, again.digest) == (original.id, original.digest)
    assert again.id == "builtin/level1/6_Softmax"


def test_every_task_runs_at_small_size_and_every_extra(suite):
    for task in suite:
        count = num_extra(task)
        assert count >= 1, task.id
        shapes = []
        for extra in [None, *range(count)]:
            _, outs = _outputs(task, extra)
            for out in outs:
                assert out.numel() > 0, task.id
                if out.is_floating_point():
                    assert torch.isfinite(out).all(), (task.id, extra)
            shapes.append(tuple(out.shape for out in outs))
        # every extra configuration yields a different output shape than the small size
        assert all(s != shapes[0] for s in shapes[1:]), (task.id, shapes)


def test_inputs_are_float32_on_the_cpu(suite):
    for task in suite:
        inputs, _ = _outputs(task)
        for x in inputs:
            assert x.device.type == "cpu" and x.dtype == torch.float32, task.id


def test_instantiate_is_seeded(by_name):
    task = by_name["1_Gemm_Bias_ReLU"]
    inputs_a, out_a = _outputs(task, seed=3)
    inputs_b, out_b = _outputs(task, seed=3)
    inputs_c, _ = _outputs(task, seed=4)
    assert torch.equal(inputs_a[0], inputs_b[0]) and torch.equal(out_a[0], out_b[0])
    assert not torch.equal(inputs_a[0], inputs_c[0])
    model_a, _ = instantiate(task, "small", seed=3)
    model_c, _ = instantiate(task, "small", seed=4)
    assert not torch.equal(model_a.linear.weight, model_c.linear.weight)


def test_instantiate_large_on_meta_costs_nothing(by_name):
    model, inputs = instantiate(by_name["14_Matmul"], "large", device="meta")
    assert [tuple(x.shape) for x in inputs] == [(2048, 4096), (4096, 2048)]
    assert inputs[0].device.type == "meta"


def test_levels_and_pattern_filters():
    assert [t.id for t in load_suite("builtin", levels=[3], pattern="*Attention*")] == [
        "builtin/level3/2_Causal_Attention"
    ]
    level2 = load_suite("builtin", levels=[2])
    assert len(level2) == 10 and {t.level for t in level2} == {2}
    assert [t.name for t in load_suite("builtin", pattern="1?_*")][:2] == [
        "10_Sum_reduction",
        "11_Mean_reduction",
    ]
    several = load_suite("builtin", pattern="*ReLU,*/level3/*MLP")
    assert [t.id for t in several] == [
        "builtin/level1/1_ReLU",
        "builtin/level2/1_Gemm_Bias_ReLU",
        "builtin/level2/3_Conv2d_BatchNorm_ReLU",
        "builtin/level3/1_MLP",
    ]


def test_builtin_files_ship_as_package_data():
    init_files = [BUILTIN_DIR / "__init__.py"] + [
        BUILTIN_DIR / f"level{n}" / "__init__.py" for n in (1, 2, 3)
    ]
    assert all(Path(p).is_file() for p in init_files)  # packages, so setuptools ships them
