"""The trigger language of the graph: state features, and the seed triggers that read them.

The graph's nodes carry triggers (the seed's static priors, prior(g | s_t)) and its edges carry
``when`` conditions; both are conditions on :class:`StateFeatures`, the features of a task and
of its current implementation that the direction policy sees. They live with the graph's data
(htam.memory never imports htam.policy); the policy scores with them.

A trigger is a conjunction of conditions on :class:`StateFeatures` with a weight and a reason::

    {"if": {"bound": "memory", "sol_fraction_below": 0.6}, "weight": 0.6,
     "why": "memory-bound and under 60% of the bandwidth roofline"}

A condition on a feature the state does not know (``None``) does not hold: a prior only fires
on evidence. The same conditions make a transition's ``applies_when`` checkable (an edge's
``when``): ``ops`` (any of these op names in the reference), ``elements_above/below`` (largest
input, in elements) and ``op_count_above`` (ops in the reference: many small kernels) join the
op families, the bound and the feedback features.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from htam.status import Status
from htam.tasks.families import FAMILIES
from htam.vocab import BOUND_KINDS, BoundKind

OP_FAMILIES = FAMILIES  # the task analysis's vocabulary


@dataclass
class StateFeatures:
    """What the direction policy knows about the task and the current implementation."""

    op_families: list[str] = field(default_factory=list)
    bound: BoundKind | None = None
    sol_fraction: float | None = None  # roofline lower-bound time / current time
    last_status: Status | None = None
    speedup: float | None = None  # best speedup over the reference so far
    ops: list[str] = field(default_factory=list)  # op names of the reference, in order
    elements: int | None = None  # elements of the largest input


def _op_families(state: StateFeatures, value: list[str]) -> bool:
    return any(family in state.op_families for family in value)


def _below(attr: str) -> Callable[[StateFeatures, float], bool]:
    def check(state: StateFeatures, value: float) -> bool:
        known = getattr(state, attr)
        return known is not None and known < value

    return check


def _above(attr: str) -> Callable[[StateFeatures, float], bool]:
    def check(state: StateFeatures, value: float) -> bool:
        known = getattr(state, attr)
        return known is not None and known >= value

    return check


def _last_status(state: StateFeatures, value: list[str]) -> bool:
    return state.last_status is not None and str(state.last_status) in value


def _bound(state: StateFeatures, value: str) -> bool:
    return state.bound == value


def _ops(state: StateFeatures, value: list[str]) -> bool:
    return any(op in state.ops for op in value)


def _op_count_above(state: StateFeatures, value: float) -> bool:
    return bool(state.ops) and len(state.ops) >= value


CONDITIONS: dict[str, Callable[[StateFeatures, Any], bool]] = {
    "op_families": _op_families,
    "bound": _bound,
    "sol_fraction_below": _below("sol_fraction"),
    "sol_fraction_above": _above("sol_fraction"),
    "speedup_below": _below("speedup"),
    "speedup_above": _above("speedup"),
    "last_status": _last_status,
    "ops": _ops,
    "elements_above": _above("elements"),
    "elements_below": _below("elements"),
    "op_count_above": _op_count_above,
}


@dataclass(frozen=True)
class Trigger:
    when: dict[str, Any]
    weight: float
    why: str

    def matches(self, state: StateFeatures) -> bool:
        return all(CONDITIONS[key](state, value) for key, value in self.when.items())

    def to_dict(self) -> dict[str, Any]:
        return {"if": dict(self.when), "weight": self.weight, "why": self.why}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trigger:
        when = dict(data.get("if", {}))
        unknown = sorted(set(when) - set(CONDITIONS))
        if unknown:
            raise ValueError(f"unknown trigger condition(s) {unknown}; known: {sorted(CONDITIONS)}")
        for key in ("op_families", "last_status", "ops"):
            if key in when and not isinstance(when[key], list):
                raise ValueError(f"trigger condition {key!r} takes a list, got {when[key]!r}")
        bad = [f for f in when.get("op_families", []) if f not in OP_FAMILIES]
        if bad:
            raise ValueError(f"unknown op families {bad}; known: {list(OP_FAMILIES)}")
        for status in when.get("last_status", []):
            Status(status)  # raises ValueError on an unknown status
        if "bound" in when and when["bound"] not in BOUND_KINDS:
            raise ValueError(f"trigger bound must be one of {BOUND_KINDS}, got {when['bound']!r}")
        return cls(when=when, weight=float(data["weight"]), why=str(data.get("why", "")))


def trigger_prior(triggers: list[Trigger], state: StateFeatures) -> tuple[float, list[str]]:
    """Sum of the weights of the matching triggers, and their reasons."""
    total, reasons = 0.0, []
    for trigger in triggers:
        if trigger.matches(state):
            total += trigger.weight
            reasons.append(trigger.why)
    return total, reasons
