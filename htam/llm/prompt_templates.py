"""Prompt rendering: Jinja2 templates in htam/llm/prompts, overridable from a directory.

Templates (variables each needs; StrictUndefined makes a missing one an error):
- ``system.j2``: language, target, backward (a task judged on its gradients)
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
from pathlib import Path

from jinja2 import FileSystemLoader, PackageLoader

# The state s_t is the loop's (htam.agent.view): re-exported here for the prompts that show it.
from htam.agent.view import (
    EXCERPT_LIMIT,
    PROMPTS_ENV,
    PathStep,
    StateView,
    environment,
    error_excerpt,
    ms,
    pct,
    render_state,
    si,
)

__all__ = [
    "EXCERPT_LIMIT",
    "PROMPTS_ENV",
    "PathStep",
    "Prompts",
    "StateView",
    "error_excerpt",
    "format_messages",
    "ms",
    "pct",
    "si",
]


class Prompts:
    def __init__(self, directory: str | Path | None = None):
        directory = directory or os.environ.get(PROMPTS_ENV)
        self.directory = directory
        loaders = [FileSystemLoader(str(directory))] if directory else []
        self.env = environment(*loaders, PackageLoader("htam.llm", "prompts"))

    def render(self, name: str, **variables: object) -> str:
        return self.env.get_template(name).render(**variables).strip() + "\n"

    def state_summary(self, state: StateView) -> str:
        return render_state(state, self.directory)


def format_messages(messages: list[dict]) -> str:
    """A conversation as one text, for run records."""
    return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in messages)
