"""A generated ModelNew refuses inputs its kernels were not written for (another dtype, device,
rank or broadcast pattern) with a clear error, rather than computing garbage from them."""

import pytest
import torch

from htam.tasks.suites import builtin_suite
from tests.offline.harness import load_solution, solution, task_of
from tests.offline.whole_models import MODELS


def _task(name: str):
    return next(t for t in builtin_suite() if t.id.endswith(name))


class _Ext:
    """Stands in for the built extension: records that the kernel was reached."""

    def __init__(self):
        self.calls = 0

    def __getattr__(self, name):
        def kernel(*args):
            self.calls += 1

        return kernel


def _model(name: str, init: tuple, language: str = "cpp", source: str | None = None):
    ext = _Ext()
    task = _task(name) if source is None else task_of(name, source)
    module = load_solution(solution(task, language), ext=ext)
    return module.ModelNew(*init), ext


# Buffers the kernels read as float*: converted by ``.double()``, they were read as float32
# bits (garbage) while the input stayed float32.
SCALE_SHIFT = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.register_buffer("scale", torch.linspace(.5, 1.5, n))
        self.register_buffer("shift", torch.randn(n))

    def forward(self, x):
        return torch.tanh(x * self.scale + self.shift)


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return [16]
"""


def _helper(code: str):
    """The solution file's own ``_checked_inputs``, run as the file defines it."""
    start = code.index("def _checked_inputs")
    namespace: dict = {}
    exec(code[start : code.index("\n\n\n", start)], {"torch": torch}, namespace)
    return namespace["_checked_inputs"]


@pytest.mark.slow
def test_the_quickstart_s_best_refuses_float64_and_other_dtypes():
    model, ext = _model("5_Elementwise_Chain", (1.7, -0.3))
    for dtype in (torch.float64, torch.float16, torch.int64):
        with pytest.raises(TypeError, match=f"{str(dtype).removeprefix('torch.')}.*float32 only"):
            model(torch.ones(4, 8, dtype=dtype))
    assert ext.calls == 0
    model(torch.ones(4, 8))  # the dtype it was written for reaches the kernel, any size
    model(torch.ones(3, 5))
    assert ext.calls == 2


def test_a_cpp_model_refuses_another_rank_and_a_non_tensor():
    model, _ = _model("5_Elementwise_Chain", (1.7, -0.3))
    with pytest.raises(ValueError, match="has 3 dims: the kernels expect 2"):
        model(torch.ones(2, 4, 8))
    with pytest.raises(TypeError, match="expected a tensor"):
        model([1.0, 2.0])


def test_inputs_read_together_must_keep_one_shape():
    code = solution(_task("6_Add_LayerNorm"), "cpp")
    assert "'same_shape': [(0, 1)]" in code
    check = _helper(code)
    spec = {"dtypes": {0: "float32", 1: "float32"}, "ranks": {0: 2, 1: 2}, "broadcast": {},
            "same_shape": [(0, 1)], "state": ["float32"]}  # fmt: skip
    model = torch.nn.LayerNorm(8)
    check(model, (torch.ones(2, 8), torch.ones(2, 8)), spec, "cpu")
    with pytest.raises(ValueError, match="must have one shape"):
        check(model, (torch.ones(2, 8), torch.ones(1, 8)), spec, "cpu")
    with pytest.raises(ValueError, match="is on meta: the kernels run on cpu"):
        check(model, (torch.ones(2, 8, device="meta"), torch.ones(2, 8)), spec, "cpu")


def test_a_broadcast_input_must_stay_broadcast():
    from htam.offline.guard import input_checks

    checks = input_checks(
        [torch.ones(4, 3, 5, 5), torch.ones(3, 1, 1), 2.0], torch.nn.Conv2d(3, 3, 1)
    )
    assert checks["broadcast"] == {1: [1, 2]}
    assert checks["dtypes"] == {0: "float32", 1: "float32"}
    assert checks["same_shape"] == []


@pytest.mark.slow
def test_the_built_quickstart_model_refuses_float64_and_computes_float32(tmp_path, monkeypatch):
    """The real extension, built as best.py builds it: float64 is refused before any kernel
    runs (it returned NaNs), float32 matches the reference."""
    monkeypatch.setenv("HTAM_CACHE_DIR", str(tmp_path))
    task = _task("5_Elementwise_Chain")
    module = load_solution(solution(task, "cpp"))
    model = module.ModelNew(1.7, -0.3)
    with pytest.raises(TypeError, match="float64.*float32 only"):
        model(torch.randn(64, 128, dtype=torch.float64))
    from htam.tasks.module import load_task_module

    ref_module = load_task_module(task.source, "small", name="guard_ref")
    reference = ref_module.Model(*ref_module.get_init_inputs())
    x = torch.randn(64, 128)
    torch.testing.assert_close(model(x), reference(x), rtol=1e-4, atol=1e-5)


def test_an_elementwise_model_refuses_its_buffers_in_another_dtype_or_device():
    model, ext = _model("scale_shift", (16,), source=SCALE_SHIFT)
    reference = torch.nn.Module()
    reference.register_buffer("scale", torch.ones(16, dtype=torch.float64))
    reference.register_buffer("shift", torch.ones(16, dtype=torch.float64))
    model.load_state_dict(reference.state_dict())  # copied into the float32 buffers: allowed
    model.double()
    with pytest.raises(TypeError, match="ModelNew's scale is torch.float64: .* float32 only"):
        model(torch.ones(4, 16))
    model.float().to("meta")
    with pytest.raises(ValueError, match="ModelNew's scale is on meta: the kernels run on cpu"):
        model(torch.ones(4, 16))
    assert ext.calls == 0


@pytest.mark.parametrize("language", ["cpp", "triton"])
def test_a_whole_model_refuses_other_input_and_parameter_dtypes(language):
    """The whole-model template keeps the reference's forward as written: the check runs
    first in it, with the other templates' message (not torch's "expected scalar type")."""
    model, ext = _model("conv_bn_net", (4, 6, 5), language, source=MODELS["conv_bn_net"])
    for dtype in (torch.float16, torch.float64):
        with pytest.raises(
            TypeError, match=f"ModelNew input 0 is torch.{str(dtype)[6:]}: .* float32 only"
        ):
            model(torch.ones(2, 4, 8, 8, dtype=dtype))
    model.double()
    with pytest.raises(
        TypeError, match="ModelNew's .* is torch.float64: these kernels compute in float32"
    ):
        model(torch.ones(2, 4, 8, 8))
    assert ext.calls == 0
