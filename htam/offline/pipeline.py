"""The offline proposer's pipeline: one function per stage, in the order the code flows.

    stage          module              from -> to
    1 trace        front.trace         task source -> Traced (fx graph, each node's fake value)
    2 lower        front.lower         Traced -> canonical nodes (one spelling per operation)
    3 match        matcher             canonical nodes -> Match (family, SSA programs); failing
                                       that, torch computes a library prefix, a kernel the rest
    4 parameters   params, strategies  Match + the base code's header -> the family's frozen
                                       parameters; apply_strategy: one strategy, a new instance
    5 backend      backends            language -> Backend; Backend.render -> KernelCode
    6 render       source              KernelCode -> the solution file (header, ModelNew)

Stages 1-3 run once per task source (:func:`analyze`, cached), 4-6 once per candidate
(:func:`parameters`, :func:`apply_strategy`, :func:`generate`). Only :class:`NoMatch` means
"no template fits": any other exception in stages 1-3 is a bug and propagates (tests see it).
"""

from __future__ import annotations

from typing import cast

from htam.offline.backends import BACKENDS, unknown_language
from htam.offline.backends.base import Backend, KernelCode
from htam.offline.front.lower import CNode
from htam.offline.front.lower import lower as lower_graph
from htam.offline.front.trace import NoMatch, Traced, Unbuildable, trace_task
from htam.offline.graph.match import FAMILY as MODEL_FAMILY
from htam.offline.graph.match import ModelIR, match_model, render_model
from htam.offline.guard import input_checks
from htam.offline.ir.model import Match
from htam.offline.matcher.families import match_families, match_library_prefix
from htam.offline.params import ModelParams, Params, baseline, parse_header
from htam.offline.source import solution_file
from htam.offline.strategies import STRATEGIES, StrategyError, transform
from htam.tasks.task import Task

__all__ = [
    "NoMatch",
    "StrategyError",
    "analyze",
    "applicable",
    "apply_strategy",
    "backend",
    "baseline",
    "explain_no_match",
    "generate",
    "lower",
    "match",
    "match_task",
    "parameters",
    "render",
    "trace",
]


# -- 1 trace --------------------------------------------------------------------------------
def trace(source: str) -> Traced:
    """The reference of ``source`` run on fake tensors, every fx node's value recorded."""
    return trace_task(Task(id="offline/match", name="match", source=source))


# -- 2 lower --------------------------------------------------------------------------------
def lower(traced: Traced) -> CNode:
    """The output node of the canonical graph (NoMatch names an operation outside the tables)."""
    return lower_graph(traced)


# -- 3 match --------------------------------------------------------------------------------
def match(traced: Traced, source: str) -> Match:
    """The family that the lowered graph fits, else the library path (its reason added), else
    the whole model cut into library calls and kernels of ours (:mod:`htam.offline.graph`).
    A network (a library prefix of several layers) is a whole model where that path runs more
    kernels of ours than the library path's one tail."""
    try:
        found = match_families(lower(traced), traced, source)
    except NoMatch as err:
        try:
            found = match_library_prefix(traced, source, err)
        except NoMatch as lib_err:
            return match_model(source, lib_err)
        whole = _whole_model(source) if found.layers >= NETWORK_LAYERS else None
        if whole is not None:  # checked as match_model's own matches (dtypes only)
            return whole
    found.input_checks = input_checks(traced.inputs, traced.model)
    return found


# A library prefix of this many layers is a network rather than one call and its epilogue:
# the whole-model path covers the norms and activations between its layers, which the library
# path leaves to torch (a ResNet block: three convolutions, their batch norms and ReLUs).
NETWORK_LAYERS = 2


def _whole_model(source: str) -> Match | None:
    """The whole-model match when it runs at least two kernels of ours (more than the library
    path's tail), else None."""
    try:
        whole = match_model(source)
    except NoMatch:
        return None
    calls = whole.ir_as(ModelIR).calls
    return whole if sum(calls.values()) >= 2 else None


def _match_source(source: str) -> Match:
    """Stages 1-3 on a task source; a reference fx cannot trace is still a whole model."""
    try:
        traced = trace(source)
    except Unbuildable:
        raise
    except NoMatch as err:
        return match_model(source, err)
    return match(traced, source)


# source -> its match, or the reason it has none (a fresh NoMatch is raised on every call: one
# cached exception re-raised would grow its traceback and chain it into unrelated calls).
_CACHE: dict[str, Match | str] = {}


def analyze(task: Task) -> Match:
    """Stages 1-3 for ``task``, cached by source; NoMatch with the reason when none fits."""
    if task.kind == "backward":  # the forward of such a task may match; its gradients do not
        raise NoMatch("a backward task: the templates write forward kernels only")
    if task.source not in _CACHE:
        if len(_CACHE) > 128:
            _CACHE.clear()
        try:
            _CACHE[task.source] = _match_source(task.source)
        except NoMatch as err:
            _CACHE[task.source] = str(err)
    result = _CACHE[task.source]
    if isinstance(result, str):
        raise NoMatch(result)
    return result


def match_task(task: Task) -> Match | None:
    """The family and IR that ``task`` fits, or None (see :func:`explain_no_match`)."""
    try:
        return analyze(task)
    except NoMatch:
        return None


def explain_no_match(task: Task) -> str:
    """Why no template applies to ``task``; the empty string when one does."""
    try:
        analyze(task)
    except NoMatch as err:
        return f"no applicable strategy: {err}"
    return ""


# -- 4 parameters ---------------------------------------------------------------------------
def parameters(match: Match, language: str, base_code: str | None) -> tuple[Params, list[str]]:
    """(parameters, applied strategies) of ``base_code`` read back from its header; the
    baseline's when it has none or was written for another family or language."""
    base = baseline(match, language)
    head = parse_header(base_code)
    if not head or head.get("family") != match.family or head.get("language") != language:
        return base, []
    applied = [s for s in head.get("applied", []) if isinstance(s, str)]
    return base.updated(head["params"]), applied


def applicable(match: Match, language: str) -> list[str]:
    """Strategies with a template for ``match`` in ``language`` (whatever the parameters)."""
    return backend(language).strategies(match)


def apply_strategy(strategy_id: str, params: Params, match: Match, language: str) -> Params:
    """The parameters after ``strategy_id``; StrategyError when it does not apply or when it
    changes nothing (a switch already on)."""
    if strategy_id not in STRATEGIES:
        raise StrategyError(f"{strategy_id} is not a strategy the offline templates know")
    if strategy_id not in applicable(match, language):
        raise StrategyError(
            f"{strategy_id} has no template for the {match.family} family "
            f"of this task ({match.summary}) in {language}"
        )
    new = transform(strategy_id, params, match.family)
    if new == params:
        raise StrategyError(f"{strategy_id} is already applied in the base code")
    return new


# -- 5 backend ------------------------------------------------------------------------------
def backend(language: str) -> Backend:
    """The registered backend writing ``language`` (ValueError for a language without one)."""
    found = BACKENDS.get(language)
    if found is None:
        raise ValueError(unknown_language(language))
    return found


# -- 6 render -------------------------------------------------------------------------------
def render(
    match: Match, language: str, params: Params, applied: list[str], code: KernelCode
) -> str:
    """The complete solution file (``ModelNew``) around the backend's code."""
    return solution_file(match, language, params, applied, code)


def generate(match: Match, language: str, params: Params, applied: list[str]) -> str:
    """Stages 5 and 6: the solution file for ``match`` with ``params`` in ``language``."""
    if match.family == MODEL_FAMILY:
        backend(language)  # ValueError for a language without one
        # a model match's parameters are ModelParams (params.baseline and the MODEL rules)
        return render_model(match, language, cast(ModelParams, params), applied)
    return render(match, language, params, applied, backend(language).render(match, params))
