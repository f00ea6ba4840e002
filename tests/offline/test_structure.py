"""The offline package's shape (issue 12): a pipeline of stages, backends behind one protocol
registered by the vocabulary's languages, frozen parameters, and headers that read back."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from htam.offline import pipeline
from htam.offline.backends import BACKENDS
from htam.offline.backends.base import KernelCode
from htam.offline.params import EwParams, GemmParams, RowParams, baseline, header
from htam.offline.strategies import RULES, STRATEGIES
from htam.vocab import Language
from tests.offline.harness import task_of
from tests.offline.sources import CASES
from tests.test_architecture import import_graph

OFFLINE = Path(pipeline.__file__).parent


def _imports(prefix: str) -> set[tuple[str, str]]:
    """(module, offline module it imports) for every module under ``prefix``, deferred included."""
    graph = import_graph()
    return {
        (a, b)
        for a, b in graph.edges
        if a.startswith(prefix) and b.startswith("htam.offline") and not b.startswith(prefix)
    }


def test_the_pipeline_module_names_the_stages_in_order():
    tree = ast.parse((OFFLINE / "pipeline.py").read_text())
    defined = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    stages = ["trace", "lower", "match", "parameters", "backend", "render"]
    assert [d for d in defined if d in stages] == stages
    # the proposer writes code through the pipeline only
    used = {b for a, b in _imports("htam.offline.templates_proposer")}
    assert "htam.offline.pipeline" in used
    assert not any(b.startswith(("htam.offline.front", "htam.offline.matcher")) for b in used)


def test_backends_are_registered_by_the_vocabulary_languages():
    assert list(BACKENDS) == [Language.TRITON, Language.CPP]
    task = task_of("g", CASES["gemm_residual"][0])
    m = pipeline.analyze(task)
    for language, backend in BACKENDS.items():
        assert backend.language is language
        ids = backend.strategies(m)
        assert ids == [s for s in STRATEGIES if s in ids]
        code = backend.render(m, baseline(m))
        assert isinstance(code, KernelCode) and code.forward and code.imports
    assert "precision.tensor_core_dot" in BACKENDS[Language.TRITON].strategies(m)
    assert "precision.tensor_core_dot" not in BACKENDS[Language.CPP].strategies(m)
    with pytest.raises(ValueError, match="write triton or cpp, not 'cuda'"):
        pipeline.backend("cuda")


def test_layers_of_the_package():
    """front -> nothing else of the package; matcher -> front and ir; the backends -> ir,
    params, strategies and their own base; neither backend imports the other; guard (the input
    check of a solution) -> nothing else of the package; source -> backends.base, ir, params
    and guard."""
    allowed = {
        "htam.offline.front": (),
        "htam.offline.matcher": ("htam.offline.front", "htam.offline.ir"),
        "htam.offline.ir": (),
        "htam.offline.params": ("htam.offline.ir",),
        "htam.offline.strategies": ("htam.offline.ir", "htam.offline.params"),
        "htam.offline.backends.triton": (
            "htam.offline.backends.base",
            "htam.offline.ir",
            "htam.offline.params",
            "htam.offline.strategies",
        ),
        "htam.offline.backends.cpp": (
            "htam.offline.backends.base",
            "htam.offline.ir",
            "htam.offline.params",
            "htam.offline.strategies",
        ),
        "htam.offline.guard": (),
        "htam.offline.source": (
            "htam.offline.backends.base",
            "htam.offline.guard",
            "htam.offline.ir",
            "htam.offline.params",
        ),
    }
    for prefix, ok in allowed.items():
        bad = sorted((a, b) for a, b in _imports(prefix) if not b.startswith(ok))
        assert bad == [], f"{prefix} imports outside {ok}"


def test_modules_stay_small():
    sizes = {p.relative_to(OFFLINE): len(p.read_text().splitlines()) for p in OFFLINE.rglob("*.py")}
    assert max(sizes.values()) <= 300, sorted(sizes.items(), key=lambda kv: -kv[1])[:3]


def test_parameters_are_frozen_and_strategies_return_new_ones():
    p = RowParams()
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.rows = 2  # type: ignore[misc]
    for family, cls in (("elementwise", EwParams), ("row", RowParams), ("gemm", GemmParams)):
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen
        for sid, rule in RULES[family].items():
            assert sid in STRATEGIES
            before = cls()
            after = rule.apply(before)
            assert type(after) is cls and before == cls(), sid  # the input is unchanged


# Headers written when the parameters were plain dicts (commit 8331140): read back as the
# parameters of the next step, and written again byte for byte the same but for the fields
# added since (a field the old header lacks takes the baseline's value).
OLD_ROW = (
    '# htam-offline: {"applied": ["algorithmic_rewrite.welford_statistics"], "family": "row", '
    '"language": "triton", "params": {"block": 1024, "cache": false, "coalesce": false, '
    '"exp2": false, "lanes": false, "online": false, "rows": 1, "split_tail": false, '
    '"vec": 1, "warps": 4, "welford": true}}'
)
OLD_GEMM = (
    '# htam-offline: {"applied": ["data_reuse.shared_memory_tiling"], "family": "gemm", '
    '"language": "cpp", "params": {"bk": 32, "epilogue": "ops", "exp2": false, "group_m": 1, '
    '"mr": 1, "split_tail": false, "tf32": false, "tile": 1, "vec": 1}}'
)


def test_headers_written_before_the_parameter_classes_read_back_the_same():
    ln = pipeline.analyze(task_of("ln", CASES["row_layer_norm"][0]))
    params, applied = pipeline.parameters(ln, "triton", OLD_ROW + "\nrest of the file\n")
    assert params == RowParams(welford=True) and applied == [
        "algorithmic_rewrite.welford_statistics"
    ]
    added = '"lanes": false, "layout": false, '
    assert header("row", "triton", params, applied) == OLD_ROW.replace('"lanes": false, ', added)
    nxt = pipeline.apply_strategy("parallel_mapping.rows_per_program", params, ln, "triton")
    assert nxt == RowParams(welford=True, rows=2)

    g = pipeline.analyze(task_of("g", CASES["gemm_residual"][0]))
    params, applied = pipeline.parameters(g, "cpp", OLD_GEMM)
    assert params == GemmParams(epilogue="ops", tile=1)
    assert header("gemm", "cpp", params, applied) == OLD_GEMM
    assert pipeline.generate(g, "cpp", params, applied).startswith(OLD_GEMM + "\n")
    # another language's header is not this code's state: the baseline's
    assert pipeline.parameters(g, "triton", OLD_GEMM) == (baseline(g), [])
