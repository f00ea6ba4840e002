"""The state summary s_t as the loop shows it to a proposer: the recent path, the task analysis
and the feedback, rendered from ``state_summary.j2``.

The state belongs to the loop, prompts to the LLM side: this module imports neither torch nor
``htam.llm``. The template is read by path from the packaged prompt directory (or from
``HTAM_PROMPTS_DIR`` when that directory has its own), so one file serves the loop and the LLM
prompts that include the summary.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from htam.vocab import BoundKind

if TYPE_CHECKING:  # the evaluator package imports torch; the view only needs the type
    from htam.evaluate.result import EvalResult

PROMPTS_ENV = "HTAM_PROMPTS_DIR"  # a directory whose *.j2 files replace the packaged ones
PACKAGED_PROMPTS = Path(__file__).resolve().parents[1] / "llm" / "prompts"
EXCERPT_LIMIT = 2000


@dataclass
class PathStep:
    direction: str
    strategy: str | None
    outcome: str  # for people and prompts, e.g. "ok 1.32x", "compile_error"
    repair: bool = False  # the step repaired the previous step's failed code
    repeat: bool = False  # the step's code repeated an earlier step's (not evaluated again)
    status: str = ""  # the outcome's bare status (a Status, or NO_CODE), for the run's summary


@dataclass
class StateView:
    """What the state summary s_t shows; the loop fills it from the task analysis and feedback."""

    task_id: str
    signature: str = ""  # op signature text, e.g. "softmax(x: float32[4096, 4096], dim=1)"
    shapes: list[str] = field(default_factory=list)
    flops: float | None = None
    bytes: float | None = None
    bound: BoundKind | None = None
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


FILTERS = {"si": si, "ms": ms, "pct": pct}


def error_excerpt(result: EvalResult | None, limit: int = EXCERPT_LIMIT) -> str:
    """The messages of a failed evaluation, then the tail of its log, cut to ``limit``
    characters. The messages come first and whole: they lead with the cause (a build's first
    compiler error and its line), which a tail of the log alone lost behind an include chain."""
    if result is None or result.correct:
        return ""
    text = "\n".join(m for m in result.messages if m)[:limit]
    log, room = result.log.strip(), limit - len(text)
    if log and room > 0:
        # The end of a compiler or traceback log says what failed last; keep it.
        tail = log if len(log) <= room else "...\n" + log[-room:]
        text = f"{text}\n{tail}" if text else tail
    return text


def environment(*loaders) -> Environment:
    """The Jinja2 settings every prompt template is rendered with (the LLM side adds loaders)."""
    from jinja2 import ChoiceLoader

    env = Environment(
        loader=ChoiceLoader(list(loaders)),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
        autoescape=False,  # prompts are plain text, not HTML
    )
    env.filters.update(FILTERS)
    return env


@lru_cache(maxsize=4)
def _state_environment(directory: str | None) -> Environment:
    loaders = [FileSystemLoader(directory)] if directory else []
    return environment(*loaders, FileSystemLoader(str(PACKAGED_PROMPTS)))


def render_state(view: StateView, directory: str | Path | None = None) -> str:
    """s_t as text (``directory`` or ``HTAM_PROMPTS_DIR`` may override the template)."""
    directory = directory or os.environ.get(PROMPTS_ENV)
    env = _state_environment(str(directory) if directory else None)
    text = env.get_template("state_summary.j2").render(
        state=view, excerpt=error_excerpt(view.feedback)
    )
    return text.strip() + "\n"
