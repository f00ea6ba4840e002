"""Run generated solutions against their references.

C++ solutions are checked in bulk: the sources of many solutions are compiled into ONE extension
(each solution's function is named by the hash of its code, so they never collide), and each
solution file then runs with its ``_ext = load_inline(...)`` statement replaced by that shared
extension. Everything else in the file (the Python wrapper, the C++ code) runs as generated.
"""

from __future__ import annotations

import ast
import hashlib
import types

import torch

from htam.offline.generate import generate
from htam.offline.match import analyze
from htam.offline.params import apply_strategy, baseline
from htam.offline.render import CPP_FLAGS
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
    """Execute a solution file; with ``ext``, its own load_inline call is replaced by ``ext``."""
    module = types.ModuleType("htam_solution")
    tree = ast.parse(code)
    if ext is not None:
        tree.body = [n for n in tree.body if not _is_ext_assign(n)]
        module.__dict__["_ext"] = ext
    exec(compile(tree, "<solution>", "exec"), module.__dict__)
    return module


def _is_ext_assign(node: ast.stmt) -> bool:
    return isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "_ext"


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
    """One extension holding the functions of every C++ solution in ``codes``."""
    from torch.utils.cpp_extension import load_inline

    units = dict(cpp_unit(c) for c in codes)
    combined = "\n".join(units[k] for k in sorted(units))
    digest = hashlib.sha1(combined.encode()).hexdigest()[:12]
    return load_inline(
        name=f"htam_offline_tests_{digest}",
        cpp_sources=combined,
        functions=sorted(units),
        extra_cflags=CPP_FLAGS,
        extra_ldflags=["-fopenmp"],
        use_pch=True,
    ), len(units)


def compare(
    task: Task,
    module: types.ModuleType,
    overrides: dict,
    atol: float = 1e-4,
    rtol: float = 1e-4,
    seed: int = 3,
) -> str | None:
    """None when ModelNew matches Model (same parameters from the same seed, same outputs)."""
    ref = load_task_module(task.source, "small")
    apply_overrides(ref, overrides)
    init = ref.get_init_inputs()
    torch.manual_seed(seed)
    model = ref.Model(*init)
    torch.manual_seed(seed)
    new = module.ModelNew(*init)
    ref_params, new_params = model.state_dict(), new.state_dict()
    if list(ref_params) != list(new_params):
        return f"parameters differ: {list(ref_params)} vs {list(new_params)}"
    for key in ref_params:
        if not torch.equal(ref_params[key], new_params[key]):
            return f"parameter {key} has other values"
    torch.manual_seed(seed + 1)
    inputs = ref.get_inputs()
    copies = [x.clone() for x in inputs]
    with torch.no_grad():
        expected = model(*inputs)
        got = new(*inputs)
    if any(not torch.equal(a, b) for a, b in zip(inputs, copies, strict=True)):
        return "an input was modified"
    if got.shape != expected.shape or got.dtype != expected.dtype:
        return f"got {got.dtype}{list(got.shape)}, expected {expected.dtype}{list(expected.shape)}"
    if not torch.allclose(got, expected, atol=atol, rtol=rtol):
        err = (got.double() - expected.double()).abs().max().item()
        return f"max abs error {err:.3g} at {overrides}"
    return None
