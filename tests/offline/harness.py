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


def cpp_flags_of(code: str) -> tuple[str, ...]:
    """The compiler flags a C++ solution file builds with (its ``load(extra_cflags=...)``)."""
    tree = ast.parse(code)
    ext = next(
        n.value
        for n in tree.body
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", None) == "_ext"
    )
    flags = next(k.value for k in ext.keywords if k.arg == "extra_cflags")
    return tuple(ast.literal_eval(flags))


def build_combined(codes: list[str]):
    """The functions of every C++ solution in ``codes``, built into one shared library per set of
    compiler flags (each solution's own: -ffast-math for some families); each unit keeps its own
    Python module (``PyInit_<name>``), imported from its library. Returns (an object with every
    unit's function as an attribute, the number of distinct units)."""
    by_flags: dict[tuple[str, ...], dict[str, str]] = {}
    for code in codes:
        name, src = cpp_unit(code)
        by_flags.setdefault(cpp_flags_of(code), {})[name] = src
    functions = {}
    for flags, units in sorted(by_flags.items()):
        library = _build_library(units, list(flags))
        for fn in units:
            spec = importlib.util.spec_from_file_location(fn, library)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            functions[fn] = getattr(module, fn)
    return types.SimpleNamespace(**functions), len(functions)


def _build_library(units: dict[str, str], flags: list[str]) -> str:
    from torch.utils.cpp_extension import load

    combined = "\n".join(units[k] for k in sorted(units))
    digest = hashlib.sha1("\0".join([combined, *flags]).encode()).hexdigest()[:12]
    name = f"htam_offline_tests_{digest}"
    root = os.environ.get("TORCH_EXTENSIONS_DIR") or tempfile.gettempdir()
    build_dir = Path(root) / name
    build_dir.mkdir(parents=True, exist_ok=True)
    source = build_dir / f"{name}.cpp"
    if not source.exists() or source.read_text() != combined:
        source.write_text(combined)
    return load(
        name=name,
        sources=[str(source)],
        build_directory=str(build_dir),
        extra_cflags=flags,
        extra_ldflags=["-fopenmp"],
        is_python_module=False,  # the library only: its modules are imported below
    )


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
    # a forward may take plain numbers (a scalar operand) beside its tensors
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]
    copies = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    with torch.no_grad():
        expected = model(*inputs)
        got = new(*inputs)
    pairs = zip(inputs, copies, strict=True)
    if any(isinstance(a, torch.Tensor) and not torch.equal(a, b) for a, b in pairs):
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


def time_ms(fn, inputs, reps: int = 20) -> float:
    """Mean CUDA time of ``fn(*inputs)`` over ``reps`` calls, after three warm-up calls."""
    with torch.no_grad():
        for _ in range(3):
            fn(*inputs)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(reps):
            fn(*inputs)
        end.record()
        torch.cuda.synchronize()
    return start.elapsed_time(end) / reps
