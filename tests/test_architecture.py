"""The house as docs/architecture.md draws it: no import cycle between modules, the core free of
the CLI and the LLM package on an offline run, and one list of methods, targets and languages."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import networkx as nx

import htam
from htam.vocab import LANGUAGES, METHOD_NAMES, Target

ROOT = Path(htam.__file__).resolve().parent
REPO = ROOT.parent


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_names(
    tree: ast.AST, package: str, deferred: bool = True
) -> list[tuple[str, list[str]]]:
    """(module, names imported from it) for every import outside ``if TYPE_CHECKING:`` blocks;
    with ``deferred`` also those inside functions (they run too, only later)."""
    found: list[tuple[str, list[str]]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if not deferred and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return
        if isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.append((module, [alias.name for alias in node.names]))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph(deferred: bool = True) -> nx.DiGraph:
    """Module -> module it imports, over every module of the htam package."""
    files = {module_name(p): p for p in ROOT.rglob("*.py")}
    graph = nx.DiGraph()
    graph.add_nodes_from(files)
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for module, names in imported_names(ast.parse(path.read_text()), package, deferred):
            if not module.startswith("htam"):
                continue
            targets = [f"{module}.{n}" for n in names if f"{module}.{n}" in files]
            if len(targets) < len(names) or not names:
                targets.append(module)  # names defined in the module (or its __init__) itself
            graph.add_edges_from((name, t) for t in targets if t in files and t != name)
    return graph


CORE = ("htam.agent", "htam.policy", "htam.memory", "htam.tasks", "htam.evaluate", "htam.offline")
CORE_MODULES = ("htam.vocab", "htam.proposer", "htam.status", "htam.lazy")


def _cycles(graph: nx.DiGraph) -> list[list[str]]:
    return [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]


def test_no_import_cycle_between_modules():
    # What runs at import time: no cycle anywhere in the package.
    graph = import_graph(deferred=False)
    assert graph.number_of_nodes() > 100 and graph.number_of_edges() > 250
    assert _cycles(graph) == []
    # Imports inside functions included: none in the core (docs/architecture.md lists the
    # deferred ones left in the CLI and the bench).
    everything = import_graph()
    core = [c for c in _cycles(everything) if any(m.startswith(CORE + CORE_MODULES) for m in c)]
    assert core == []


def test_the_cycle_detector_sees_a_cycle(tmp_path):
    # The same parsing on two modules importing each other, one of them inside a function.
    a = ast.parse("from htam.b import f\n")
    b = ast.parse("def g():\n    from htam.a import h\n")
    c = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from htam.a import h\n")
    assert imported_names(a, "htam") == [("htam.b", ["f"])]
    assert imported_names(b, "htam") == [("htam.a", ["h"])]
    assert imported_names(c, "htam") == [("typing", ["TYPE_CHECKING"])]
    assert imported_names(b, "htam", deferred=False) == []
    graph = nx.DiGraph([("htam.a", "htam.b"), ("htam.b", "htam.a")])
    assert _cycles(graph) == [["htam.a", "htam.b"]]


def test_packages_depend_in_one_direction():
    """The layers of docs/architecture.md: nothing below the loop imports it, the CLI, the bench
    or the LLM package; the LLM side sees the loop only through its state view."""
    graph = import_graph()
    package = {n: ".".join(n.split(".")[:2]) for n in graph}
    used = {(package[a], package[b]) for a, b in graph.edges if package[a] != package[b]}
    for low in CORE + CORE_MODULES:
        for high in ("htam.cli", "htam.llm", "htam.bench"):
            assert (low, high) not in used, f"{low} imports {high}"
    for low in ("htam.policy", "htam.memory", "htam.evaluate", "htam.tasks", "htam.offline"):
        assert (low, "htam.agent") not in used, f"{low} imports htam.agent"
    llm_to_agent = {
        b for a, b in graph.edges if a.startswith("htam.llm") and b.startswith("htam.agent")
    }
    assert llm_to_agent == {"htam.agent.view"}
    # The policy computes, the memory stores: the memory never imports the policy (not even
    # inside a function), and the policy reads only the graph's data and trigger language.
    assert ("htam.memory", "htam.policy") not in used, "htam.memory imports htam.policy"
    policy_to_memory = {
        b for a, b in graph.edges if a.startswith("htam.policy") and b.startswith("htam.memory")
    }
    assert policy_to_memory == {"htam.memory.model", "htam.memory.triggers"}


OFFLINE_STEP = textwrap.dedent(
    """
    import importlib.abc, sys

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name in ("htam.llm", "htam.cli", "openai") or name.startswith(("htam.llm.", "htam.cli.", "openai.")):
                raise ImportError(f"blocked: {name}")
            return None

    sys.meta_path.insert(0, Block())
    from htam.agent import OptimizeConfig, Optimizer
    from htam.evaluate.result import EvalResult, Timing
    from htam.memory import MemoryBank
    from htam.offline import OfflineProposer
    from htam.status import Status
    from htam.tasks import builtin_suite

    class Fake:  # the evaluator protocol, timing each candidate at twice the reference's speed
        config = type("C", (), {"size": "small"})()
        def reference(self, task, timed=True):
            return type("R", (), {"flops": 0, "nbytes": 1 << 16, "dtypes": ["float32"],
                                  "timing": {"median_ms": 1.0}, "compile_timing": None})()
        def peaks(self):
            return {"bandwidth_gbs": 10.0, "tf32_tflops": 1.0, "fp32_tflops": 1.0, "bf16_tflops": 2.0}
        def evaluate(self, task, code, language):
            t = Timing(0.5, 0.49, 0.51, 0.01, 10, "perf_counter")
            return EvalResult(Status.OK, runtime_ms=0.5, ref_runtime_ms=1.0, timing=t)

    # a chain: seed 0's first direction (fusion) has a template for it, so step 0 is learned
    task = next(t for t in builtin_suite() if t.id.endswith("level2/5_Elementwise_Chain"))
    bank = MemoryBank.in_memory()
    steps = []
    config = OptimizeConfig(method="htam", steps=1, seed=0, target="cpu", language="cpp")
    proposer = OfflineProposer(target="cpu", language="cpp")
    summary = Optimizer(proposer, Fake(), bank, config, on_step=steps.append).run(task, sys.argv[1])
    leaked = sorted(m for m in sys.modules if m.startswith(("htam.llm", "htam.cli", "openai")))
    print(len(steps), steps[0].feedback.status, steps[0].memory_updated, bank.step_count(), leaked)
    """
)


def test_an_offline_step_runs_with_the_llm_package_unimportable(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "HTAM_CACHE_DIR": str(tmp_path / "cache")}
    run = subprocess.run(
        [sys.executable, "-c", OFFLINE_STEP, str(tmp_path / "run")],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["1", "ok", "True", "1", "[]"]


def test_the_block_in_that_test_does_block(tmp_path):
    probe = OFFLINE_STEP.split("from htam.agent import")[0] + "import htam.llm\n"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
    assert run.returncode == 1 and "blocked: htam.llm" in run.stderr


def _help(*args: str) -> str:
    from typer.testing import CliRunner

    from htam.cli import app

    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "400", "TERM": "dumb"})
    assert result.exit_code == 0, result.output
    return re.sub(r"\s+", " ", result.output)


def _option_help(text: str, option: str) -> str:
    match = re.search(rf"{option} (?:<[^>]+> )?(?:\[[^\]]+\] )?(.*?)(?: │ │ --| │ ╰|$)", text)
    assert match, option
    return match.group(1)


def test_cli_help_names_exactly_the_registry():
    text = _help("optimize")
    methods = _option_help(text, "--method")
    named = re.findall(r"[a-z][a-z-]+", methods.split("[default")[0])
    assert named == list(METHOD_NAMES)
    assert len(named) == 10
    targets = re.findall(r"[a-z]+", _option_help(text, "--target").split("(")[0])
    assert [t for t in targets if t != "or"] == [str(t) for t in Target]
    languages = _option_help(text, "--language")
    for target, langs in LANGUAGES.items():
        assert f"{' | '.join(langs)} ({target})" in languages


def test_bench_help_and_plan_come_from_the_registry():
    methods = _option_help(_help("bench"), "--methods")
    named = re.findall(r"[a-z][a-z-]+", methods.split(":", 1)[1].split("[default")[0])
    assert named == list(METHOD_NAMES)
    from htam.bench.bench_config import MEMORYLESS, BenchConfig
    from htam.vocab import METHODS, Guide

    assert MEMORYLESS == tuple(n for n, spec in METHODS.items() if spec.guide is Guide.NONE)
    config = BenchConfig(out=Path("unused"), methods=list(METHOD_NAMES), steps=5)
    assert [config.planned_steps(m) for m in METHOD_NAMES] == [
        METHODS[m].steps or 5 for m in METHOD_NAMES
    ]


def test_building_the_offline_proposer_through_the_cli_imports_nothing_of_the_llm_side():
    # The CLI's preflight asks an LLM proposer's endpoint; an offline one has none to ask.
    code = (
        "import sys\n"
        "from htam.bench.bench_config import ProposerSpec\n"
        "from htam.cli.llm_options import build_proposer\n"
        "build_proposer(ProposerSpec(), 'cpu', 'cpp', quiet=True)\n"
        "print(sorted(m for m in sys.modules if m.startswith(('htam.llm', 'openai'))))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == "[]"


def test_no_script_imports_the_tests():
    """scripts/ drives the package; what it shares with the tests lives in htam/."""
    found = []
    for path in sorted((REPO / "scripts").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            found += [f"{path.relative_to(REPO)}: {n}" for n in names if n.split(".")[0] == "tests"]
    assert found == []
