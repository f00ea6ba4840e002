"""The offline package's shape (issue 12): a pipeline of stages, backends behind one protocol
registered by the vocabulary's languages, layers that import downwards only."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from htam.offline import pipeline
from htam.offline.backends import BACKENDS
from htam.offline.backends.base import KernelCode
from htam.offline.params import baseline
from htam.offline.strategies import STRATEGIES
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
    params, strategies and their own base; neither backend imports the other."""
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
        "htam.offline.source": (
            "htam.offline.backends.base",
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
