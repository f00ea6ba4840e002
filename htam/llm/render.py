"""Prompt rendering: Jinja2 templates in htam/llm/prompts, overridable from a directory.

Templates (variables each needs; StrictUndefined makes a missing one an error):
- ``system.j2``: language, target
- ``state_summary.j2``: state (StateView), excerpt (error excerpt or "")
- ``choose_strategy.j2``: task, language, target, state_summary, base_code, direction,
  guidance, candidates (list of Strategy)
- ``choose_repair.j2``: error, ids
- ``implement.j2``: task, language, target, state_summary, base_code, direction, strategy,
  guidance
- ``repair.j2``: task, language, target, state_summary, base_code, strategy, guidance, status,
  excerpt, failing_code
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from jinja2 import ChoiceLoader, Environment, FileSystemLoader, PackageLoader, StrictUndefined

if TYPE_CHECKING:  # the evaluator package imports torch; prompts only need the type
    from htam.evaluate.result import EvalResult

PROMPTS_ENV = "HTAM_PROMPTS_DIR"  # a directory whose *.j2 files replace the packaged ones
EXCERPT_LIMIT = 2000


@dataclass
class PathStep:
    direction: str
    strategy: str | None
    outcome: str  # e.g. "ok 1.32x", "compile_error"
    repair: bool = False  # the step repaired the previous step's failed code


@dataclass
class StateView:
    """What the state summary s_t shows; the loop fills it from the task analysis and feedback."""

    task_id: str
    signature: str = ""  # op signature text, e.g. "softmax(x: float32[4096, 4096], dim=1)"
    shapes: list[str] = field(default_factory=list)
    flops: float | None = None
    bytes: float | None = None
    bound: str | None = None  # "memory" or "compute"
    roofline_ms: float | None = None
    feedback: EvalResult | None = None
    path: list[PathStep] = field(default_factory=list)


def si(value: float | None) -> str:
    """1.5e9 -> '1.50 G' (the unit follows in the template)."""
    if value is None:
        return "? "
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.2f} {prefix}"
    return f"{value:g} "


def ms(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value * 1000:.1f} us" if value < 1 else f"{value:.3f} ms"


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def error_excerpt(result: EvalResult | None, limit: int = EXCERPT_LIMIT) -> str:
    """Messages and the tail of the log of a failed evaluation, cut to ``limit`` characters."""
    if result is None or result.correct:
        return ""
    text = "\n".join(m for m in result.messages if m)
    if result.log.strip():
        text = f"{text}\n{result.log.strip()}" if text else result.log.strip()
    # The end of a compiler or traceback log says what failed; keep it.
    return text if len(text) <= limit else "...\n" + text[-limit:]


class Prompts:
    def __init__(self, directory: str | Path | None = None):
        directory = directory or os.environ.get(PROMPTS_ENV)
        loaders = [FileSystemLoader(str(directory))] if directory else []
        self.env = Environment(
            loader=ChoiceLoader([*loaders, PackageLoader("htam.llm", "prompts")]),
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=False,
            autoescape=False,  # prompts are plain text, not HTML
        )
        self.env.filters.update(si=si, ms=ms, pct=pct)

    def render(self, name: str, **variables: object) -> str:
        return self.env.get_template(name).render(**variables).strip() + "\n"

    def state_summary(self, state: StateView) -> str:
        return self.render("state_summary.j2", state=state, excerpt=error_excerpt(state.feedback))


def format_messages(messages: list[dict]) -> str:
    """A conversation as one text, for run records."""
    return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in messages)
