"""Run generated solutions against their references.

C++ solutions are checked in bulk: the sources of many solutions are compiled into ONE extension
(each solution's function is named by the hash of its code, so they never collide), and each
solution file then runs with its ``_ext = load(...)`` statement replaced by that shared
extension. Everything else in the file (the Python wrapper, the C++ code) runs as generated.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import tempfile
import types
from pathlib import Path

import torch

from htam.offline.backends.cpp.loader import CPP_FLAGS
from htam.offline.pipeline import analyze, apply_strategy, baseline, generate
from htam.tasks.module import apply_overrides, load_task_module
from htam.tasks.task import Task


def task_of(name: str, source: str) -> Task:
    return Task(id=f"test/{name}", name=name, source=source)


def solution(task: Task, language: str, strategies: tuple[str, ...] = ()) -> str:
    m = analyze(task)
    params = baseline(m)
    for s in strategies:
        params = apply_strategy(s, params, m, language)
    return generate(m, language, params, list(strategies))


def load_solution(code: str, ext=None) -> types.ModuleType:
    """Import a solution file (Triton needs kernels defined in a real file); with ``ext``, its
    own ``_ext = load(...)`` statement is left out and ``_ext`` is that shared extension instead."""
    if ext is not None:
        tree = ast.parse(code)
        tree.body = [n for n in tree.body if not _is_ext_assign(n)]
        code = ast.unparse(tree)
    digest = hashlib.sha1(code.encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / "htam_offline_solutions" / f"sol_{digest}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(code)
    spec = importlib.util.spec_from_file_location(f"htam_solution_{digest}", path)
    module = importlib.util.module_from_spec(spec)
    module.__dict__["_ext"] = ext
    spec.loader.exec_module(module)
    return module


def _is_ext_assign(node: ast.stmt) -> bool:
    """``_ext = load(...)`` or the statement writing its source file."""
    if not isinstance(node, ast.Assign):
        return False
    target = node.targets[0]
    names = [getattr(t, "id", "") for t in getattr(target, "elts", [target])]
    return "_ext" in names or "_source" in names


def cpp_unit(code: str) -> tuple[str, str]:
    """(function name, C++ source) of a C++ solution file."""
    tree = ast.parse(code)
    values = {
        n.targets[0].id: n.value
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)
    }
    src = values["CPP_SRC"].value
    name = next(k.value.value for k in values["_ext"].keywords if k.arg == "name")
    return name, src


def build_combined(codes: list[str]):
    """One shared library holding the functions of every C++ solution in ``codes``; each unit
    keeps its own Python module (``PyInit_<name>``), imported from that library. Returns (an
    object with every unit's function as an attribute, the number of distinct units)."""
    from torch.utils.cpp_extension import load

    units = dict(cpp_unit(c) for c in codes)
    combined = "\n".join(units[k] for k in sorted(units))
    digest = hashlib.sha1(combined.encode()).hexdigest()[:12]
    name = f"htam_offline_tests_{digest}"
    root = os.environ.get("TORCH_EXTENSIONS_DIR") or tempfile.gettempdir()
    build_dir = Path(root) / name
    build_dir.mkdir(parents=True, exist_ok=True)
    source = build_dir / f"{name}.cpp"
    if not source.exists() or source.read_text() != combined:
        source.write_text(combined)
    library = load(
        name=name,
        sources=[str(source)],
        build_directory=str(build_dir),
        extra_cflags=CPP_FLAGS,
        extra_ldflags=["-fopenmp"],
        is_python_module=False,  # the library only: its modules are imported below
    )
    functions = {}
    for fn in units:
        spec = importlib.util.spec_from_file_location(fn, library)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        functions[fn] = getattr(module, fn)
    return types.SimpleNamespace(**functions), len(units)


def build_pair(
    task: Task, module: types.ModuleType, overrides: dict, seed: int = 3, size: str = "small"
):
    """(reference, candidate, inputs) built from the same seed; raises if parameters differ."""
    ref = load_task_module(task.source, size)
    apply_overrides(ref, overrides)
    init = ref.get_init_inputs()
    torch.manual_seed(seed)
    model = ref.Model(*init)
    torch.manual_seed(seed)
    new = module.ModelNew(*init)
    ref_params, new_params = model.state_dict(), new.state_dict()
    assert list(ref_params) == list(new_params), f"{list(ref_params)} vs {list(new_params)}"
    for key in ref_params:
        assert torch.equal(ref_params[key], new_params[key]), f"parameter {key} differs"
    torch.manual_seed(seed + 1)
    return model, new, ref.get_inputs()


def compare(
    task: Task,
    module: types.ModuleType,
    overrides: dict,
    atol: float = 1e-4,
    rtol: float = 1e-4,
    seed: int = 3,
    device: str = "cpu",
    size: str = "small",
    rel_l2: float | None = None,
) -> str | None:
    """None when ModelNew matches Model (same parameters from the same seed, same outputs).

    ``rel_l2`` replaces the elementwise check by a relative L2 bound (TF32 products)."""
    model, new, inputs = build_pair(task, module, overrides, seed, size)
    model, new = model.to(device), new.to(device)
    inputs = [x.to(device) for x in inputs]
    copies = [x.clone() for x in inputs]
    with torch.no_grad():
        expected = model(*inputs)
        got = new(*inputs)
    if any(not torch.equal(a, b) for a, b in zip(inputs, copies, strict=True)):
        return "an input was modified"
    if got.shape != expected.shape or got.dtype != expected.dtype:
        return f"got {got.dtype}{list(got.shape)}, expected {expected.dtype}{list(expected.shape)}"
    if rel_l2 is not None and got.is_floating_point():
        rel = ((got - expected).norm() / expected.norm().clamp_min(1e-6)).item()
        return None if rel < rel_l2 else f"relative L2 error {rel:.3g} at {overrides}"
    if not torch.allclose(got, expected, atol=atol, rtol=rtol):
        err = (got.double() - expected.double()).abs().max().item()
        return f"max abs error {err:.3g} at {overrides}"
    return None
