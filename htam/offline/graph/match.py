"""The ``model`` family's match (the rewritten source) and its solution file."""

from __future__ import annotations

import ast
from collections import Counter
from dataclasses import dataclass, field

from htam.offline.front.trace import NoMatch
from htam.offline.graph import cpp_rt, triton_rt
from htam.offline.graph.dryrun import dry_run
from htam.offline.graph.prune import prune
from htam.offline.graph.recurrent import RECURRENT
from htam.offline.graph.rewrite import Rewritten, rewrite
from htam.offline.graph.runtime import RUNTIME
from htam.offline.graph.triton_cells import CELLS
from htam.offline.guard import CHECK_HELPER, check_call
from htam.offline.ir.model import Match
from htam.offline.params import ModelParams, header

FAMILY = "model"


@dataclass
class ModelIR:
    rewritten: Rewritten
    # primitive -> how often the dry run's forward called it (the kernels of our own that run)
    calls: Counter = field(default_factory=Counter)


def match_model(source: str, why: NoMatch | None = None) -> Match:
    """The whole-model match of ``source``; NoMatch (after ``why``, the other families'
    refusal) names what the model holds when no segment of it is covered."""
    try:
        rw = rewrite(source)
    except NoMatch as err:
        raise NoMatch(f"{why}; whole model: {err}" if why else str(err)) from err
    calls, checks = dry_run(rw, source)
    if not calls:
        found = ", ".join(sorted(rw.sites))
        prefix = f"{why}; whole model: " if why else ""
        raise NoMatch(f"{prefix}its covered modules ({found}) never run in forward")
    sites = ", ".join(f"{family} {n}" for family, n in sorted(rw.sites.items()))
    return Match(
        family=FAMILY,
        summary=f"whole model, kernels for: {sites}; library calls kept in torch",
        inputs=rw.forward_args,
        ir=ModelIR(rw, Counter(calls)),  # type: ignore[arg-type]  # Match.ir's union cannot name this layer's IR
        init_source="",
        input_checks=checks,
    )


def render_model(match: Match, language: str, params: ModelParams, applied: list[str]) -> str:
    """The complete solution file: header, imports, the language's primitives, the runtime's
    modules, then the model's rewritten classes."""
    rw: Rewritten = match.ir_as(ModelIR).rewritten
    if language == "triton":
        imports, prims = triton_rt.IMPORTS, triton_rt.PRIMITIVES + CELLS
    else:
        imports, prims = cpp_rt.IMPORTS, cpp_rt.primitives(params)
    have = set(imports.splitlines())
    extra = [line for line in rw.imports.splitlines() if line not in have]
    doc = (
        f'"""HTAM offline proposer ({language}): whole-model template.\n\n'
        f"Pattern: {match.summary}.\n"
        f"Strategies applied: {', '.join(applied) or 'none (baseline)'}.\n"
        '"""'
    )
    parts = [
        header(FAMILY, language, params, applied),
        doc,
        "",
        imports,
        "\n".join(extra),
        prims.replace("{block}", str(params.block)).replace("{warps}", str(params.warps)),
        f"_FUSE = {params.fuse!r}\n",
        RUNTIME,
        RECURRENT,
        CHECK_HELPER,
        _checked_forward(rw.source, check_call(match.inputs, match.input_checks, language)),
    ]
    return prune("\n".join(parts)) + "\n"


def _checked_forward(source: str, check: str) -> str:
    """``source`` with ``check`` (:func:`htam.offline.guard.check_call`) as the first statement
    of ``ModelNew.forward``, after its docstring: the model's own forward, as written, runs only
    on what the kernels were written for."""
    tree = ast.parse(source)
    model = next(s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == "ModelNew")
    forward = next(s for s in model.body if isinstance(s, ast.FunctionDef) and s.name == "forward")
    first = 0 if ast.get_docstring(forward) is None else 1
    forward.body.insert(first, ast.parse(check).body[0])
    return ast.unparse(ast.fix_missing_locations(tree))
