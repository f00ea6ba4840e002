"""Robust-KBench tasks as shipped: layouts, ids, configurations, errors, the shipped eleven."""

import json
import runpy
from pathlib import Path

import pytest
import torch

from htam.tasks import TaskError, instantiate, load_suite, load_task, num_extra

from .robust_fixture import CONFIG, write_tree

SHIPPED = Path(__file__).resolve().parents[3] / "shared" / "robust-kbench" / "tasks"
# Configurations per forward task (1 timed + the checked ones), counted from the config files:
# every (init, input, shared) combination of the single and of the multi lists, once.
SHIPPED_FORWARD = {
    "layernorm": 8, "llama_ffw": 8, "llama_rmsnorm": 4, "mnist_conv_relu_pool": 8,
    "mnist_cross_entropy": 2, "mnist_linear": 8, "mnist_linear_relu": 9, "mnist_pool": 2,
    "resnet_block": 24, "unet_conv2d": 13, "unet_linear": 9,
}  # fmt: skip
SHIPPED_BACKWARD = {
    "layernorm", "llama_rmsnorm", "mnist_conv_relu_pool", "mnist_cross_entropy", "mnist_linear",
    "mnist_linear_relu", "mnist_pool", "unet_linear",
}  # fmt: skip


def test_layouts_ids_kinds_and_levels(tmp_path):
    root = write_tree(tmp_path)
    tasks = load_suite(root)
    assert [(t.id, t.kind, t.level) for t in tasks] == [
        ("robust-kbench/hinge", "forward", None),
        ("robust-kbench/scale", "forward", None),
        ("robust-kbench/scale_backward", "backward", None),
    ]  # the kernelbench/ tree is not descended into from tasks/
    tree = [(t.id, t.level) for t in load_suite(root / "kernelbench")]
    assert tree == [("robust-kbench/level1/100_HingeLoss", 1)]
    assert [(t.id, t.level) for t in load_suite(root / "kernelbench" / "level_1")] == tree
    assert [t.id for t in load_suite(root / "scale")] == [
        "robust-kbench/scale",
        "robust-kbench/scale_backward",
    ]
    # one task folder or file through load_task: the folder stands for its forward task
    assert load_task(root / "scale").kind == "forward"
    assert load_task(root / "scale" / "func_backward.py").id == "robust-kbench/scale_backward"
    assert "HTAM_KIND = 'backward'" in load_task(root / "scale" / "func_backward.py").source


def test_single_configuration_timed_every_multi_one_checked(tmp_path):
    task = load_task(write_tree(tmp_path) / "scale")
    # 2 init x 2 input x 2 shared multi combinations + the single one, which is among them
    assert num_extra(task) == 7
    for size in ("small", "large"):
        model, (x,) = instantiate(task, size)
        assert x.shape == (3, 5) and model.weight.shape == (5,) and model.shift == 0.5
    seen = set()
    for extra in range(7):
        model, (x,) = instantiate(task, "small", extra=extra)
        seen.add((tuple(x.shape), model.shift, bool((model.weight == 1).all())))
    assert seen == {
        ((3, 11), 0.5, False), ((7, 5), 0.5, False), ((7, 11), 0.5, False),
        ((3, 5), 2.0, True), ((3, 11), 2.0, True), ((7, 5), 2.0, True), ((7, 11), 2.0, True),
    }  # fmt: skip


def test_reference_is_robust_kbench_own_call(tmp_path):
    """HTAM's Model(*get_init_inputs()) and get_inputs() are Robust-KBench's
    Model(**init, **shared) and get_inputs(**input, **shared), value for value."""
    root = write_tree(tmp_path)
    task = load_task(root / "scale")
    model, inputs = instantiate(task, "large", seed=3)
    namespace = runpy.run_path(str(root / "scale" / "func_forward.py"))
    torch.manual_seed(3)
    theirs = namespace["Model"](init_method="random", num_features=5)
    torch.manual_seed(3)
    (x,) = namespace["get_inputs"](batch_size=3, num_features=5)
    assert torch.equal(inputs[0], x)
    assert torch.equal(model(*inputs), theirs(x))
    # forward is rebound without fn= (torch.fx traces it); the class keeps its name
    assert type(model).__name__ == "Model" and model.forward.__name__ == "_rkb_forward"


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda d: (d / "config_forward.json").unlink(), "needs config_forward.json beside it"),
        (lambda d: (d / "config_forward.json").write_text("{"), "cannot read"),
        (lambda d: _config(d, multi_init_configs=[]), "multi_init_configs must be a non-empty"),
        (lambda d: _config(d, single_input_configs=[{"rows": 3}]), "get_inputs(**{"),
        (lambda d: _source(d, "def get_inputs(", "def make_inputs("), "missing get_inputs"),
        (lambda d: _source(d, "import torch\n", "import torch\nraise ValueError('x')\n"),
         "module fails to execute: ValueError: x"),
    ],
)  # fmt: skip
def test_bad_tasks_give_one_line(tmp_path, change, problem):
    folder = write_tree(tmp_path) / "scale"
    change(folder)
    with pytest.raises(TaskError) as error:
        load_task(folder)
    message = str(error.value)
    assert problem in message and "\n" not in message and str(folder) in message


def _config(folder: Path, **changes) -> None:
    (folder / "config_forward.json").write_text(json.dumps(CONFIG | changes))


def _source(folder: Path, old: str, new: str) -> None:
    path = folder / "func_forward.py"
    path.write_text(path.read_text().replace(old, new))


shipped = pytest.mark.skipif(not SHIPPED.is_dir(), reason=f"{SHIPPED} is missing")


@shipped
def test_shipped_suite_eleven_forward_eight_backward():
    tasks = load_suite(SHIPPED, validate=False)
    forward = {t.name: num_extra(t) + 1 for t in tasks if t.kind == "forward"}
    backward = {t.name.removesuffix("_backward") for t in tasks if t.kind == "backward"}
    assert forward == SHIPPED_FORWARD
    assert backward == SHIPPED_BACKWARD
    assert all(t.id == f"robust-kbench/{t.name}" for t in tasks)
    # mnist_pool's config passes kernel_size to a Model() without parameters: dropped, named
    pool = next(t for t in tasks if t.name == "mnist_pool")
    assert "# Not passed to Model (it has no such parameter): kernel_size" in pool.source


# Output shapes at the single (timed) configuration.
SHIPPED_OUTPUTS = {
    "layernorm": (1, 64, 256, 256), "llama_ffw": (2, 128, 4096),
    "llama_rmsnorm": (16, 1024, 4096), "mnist_conv_relu_pool": (64, 32, 13, 13),
    "mnist_cross_entropy": (), "mnist_linear": (64, 10), "mnist_linear_relu": (64, 128),
    "mnist_pool": (64, 64, 14, 14), "resnet_block": (32, 64, 224, 224),
    "unet_conv2d": (8, 64, 32, 32), "unet_linear": (64, 256, 128),
}  # fmt: skip


@pytest.mark.slow
@shipped
def test_every_shipped_forward_reference_runs_on_cpu_at_its_single_configuration():
    """About 20 s on two CPU cores: resnet_block (237 GFLOP) and llama_ffw dominate."""
    shapes = {}
    for task in load_suite(SHIPPED, validate=False):
        if task.kind == "forward":
            model, inputs = instantiate(task, "large")
            with torch.no_grad():
                output = model(*inputs)
            assert torch.isfinite(output).all(), task.name
            shapes[task.name] = tuple(output.shape)
            del model, inputs, output
    assert shapes == SHIPPED_OUTPUTS
