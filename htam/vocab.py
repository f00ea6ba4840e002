"""One vocabulary for the whole package: targets, languages, methods and the direction sentinels.

Every list of names lives here once, with the one shape the memory and the proposers share
(``Strategy``); the loop, the policy, the memory, the CLI's help texts and
the bench configuration import it. Light on purpose: standard library only, so the CLI can
build its help text without importing torch.

Methods (DESIGN §1) are specs: which guide runs them (``guide``), what an ablation of the full
method removes (``variant``), whether they need a memory bank, and how many steps they take
(``oneshot`` is one step, wherever a run or a bench unit counts steps).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, cast, get_args


class Target(StrEnum):
    CUDA = "cuda"
    CPU = "cpu"


class Language(StrEnum):
    CUDA = "cuda"
    TRITON = "triton"
    CPP = "cpp"


# The languages a target runs, its default first.
LANGUAGES: dict[str, tuple[Language, ...]] = {  # keyed by Target (a str: looked up by either)
    Target.CUDA: (Language.CUDA, Language.TRITON),
    Target.CPU: (Language.CPP, Language.TRITON),
}


class Direction(StrEnum):
    """The two sentinels a step records instead of a global direction id (kept distinct: they
    mean different things and both are on disk in run directories and banks)."""

    NONE = "none"  # a method that decides no direction (refine, oneshot): nothing to learn
    ANY = "*"  # a no-hierarchy decision: every local is a candidate, the pick's parent is recorded


# A task's problem size: "small" (the task's HTAM_SMALL overrides, for CPUs) or "large" (its own).
Size = Literal["small", "large"]
SIZES: tuple[Size, ...] = get_args(Size)


def size_named(word: str) -> Size:
    """The size ``word`` names; ValueError for any other word."""
    for size in SIZES:
        if size == word:
            return size
    raise ValueError(f"unknown size {word!r}; choose {' or '.join(SIZES)}")

# Which roof of the roofline bounds an operator's time (its lower bound's kind).
BoundKind = Literal["memory", "compute"]
BOUND_KINDS: tuple[BoundKind, ...] = get_args(BoundKind)


@dataclass(frozen=True)
class Strategy:
    """A local strategy as a proposer sees it (a view of a local node of the memory)."""

    id: str  # "<direction>.<name>", e.g. "fusion.elementwise_chain_fusion"
    direction: str  # id of the global parent, e.g. "fusion"
    title: str
    description: str = ""


class Guide(StrEnum):
    """Which guide realizes a method (htam.agent.guides)."""

    HTAM = "htam"  # the direction policy over the transition graph, with its ablations
    FLAT = "flat"  # top-k similar past experiences, no hierarchy
    NONE = "none"  # feedback only


@dataclass(frozen=True)
class Variant:
    """What an ablation removes from the full method (the defaults are the full method)."""

    prefix_len: int | None = None  # None: K from the config
    positional: bool = True  # False: uniform position weights
    updates: bool = True  # False: frozen memory
    hierarchy: bool = True  # False: no direction decision, all locals are candidates
    local: bool = True  # False: direction only, no local strategies
    uniform: bool = False  # True: directions drawn uniformly (the random control)


@dataclass(frozen=True)
class MethodSpec:
    name: str
    guide: Guide
    summary: str
    variant: Variant = Variant()
    steps: int | None = None  # fixed number of steps, None: the run's T

    @property
    def uses_memory(self) -> bool:
        return self.guide is not Guide.NONE

    def steps_for(self, planned: int) -> int:
        return self.steps if self.steps is not None else planned


_SPECS = (
    MethodSpec("htam", Guide.HTAM, "the full method"),
    MethodSpec("no-prefix", Guide.HTAM, "last step only", Variant(prefix_len=1)),
    MethodSpec("no-position", Guide.HTAM, "uniform position weights", Variant(positional=False)),
    MethodSpec("no-update", Guide.HTAM, "frozen memory", Variant(updates=False)),
    MethodSpec("no-hierarchy", Guide.HTAM, "all locals, no direction", Variant(hierarchy=False)),
    MethodSpec("no-local", Guide.HTAM, "directions only", Variant(local=False)),
    MethodSpec("random", Guide.HTAM, "directions drawn uniformly", Variant(uniform=True)),
    MethodSpec("flat", Guide.FLAT, "top-k similar past experiences"),
    MethodSpec("refine", Guide.NONE, "feedback-only iteration"),
    MethodSpec("oneshot", Guide.NONE, "a single generation", steps=1),
)



def _enumeration(name: str, values: list[str]) -> type[StrEnum]:
    """An enumeration of ``values`` built at run time. mypy reads members only when written out
    and takes this call for a value lookup: the functional API returns a class."""
    members = {value.upper().replace("-", "_"): value for value in values}
    return cast(type[StrEnum], StrEnum(name, members))


Method = _enumeration("Method", [spec.name for spec in _SPECS])
Method.__doc__ = "Every method the loop runs (the registry's keys, in display order)."

METHODS: dict[str, MethodSpec] = {spec.name: spec for spec in _SPECS}
METHOD_NAMES: tuple[str, ...] = tuple(METHODS)


def method_spec(name: str) -> MethodSpec:
    """The spec of ``name``; ValueError naming the known methods otherwise."""
    try:
        return METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; known: {', '.join(METHOD_NAMES)}") from None


def methods_of(guide: Guide) -> tuple[str, ...]:
    return tuple(name for name, spec in METHODS.items() if spec.guide is guide)


def check_target(target: str, language: str | None = None) -> tuple[Target, Language]:
    """(target, language) validated; the language defaults to the target's first one."""
    try:
        the_target = Target(target)
    except ValueError:
        known = " or ".join(Target)
        raise ValueError(f"unknown target {target!r}; choose {known}") from None
    allowed = LANGUAGES[the_target]
    if language is None:
        return the_target, allowed[0]
    if language not in allowed:
        names = " or ".join(str(lang) for lang in allowed)
        raise ValueError(f"language {language!r} does not run on target {target}; choose {names}")
    return the_target, Language(language)


def languages_help() -> str:
    """``cuda | triton (cuda); cpp | triton (cpu)``: the help text of a --language option."""
    return "; ".join(f"{' | '.join(langs)} ({target})" for target, langs in LANGUAGES.items())


def targets_help() -> str:
    return " or ".join(Target)
