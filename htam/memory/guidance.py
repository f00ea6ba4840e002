"""The memory as prompt text: what the strategy choice and the code writer are shown.

``choice_guidance`` is the memory of one decision (DESIGN §1 step 3): the chosen direction, every
candidate local strategy (pattern for the target language, checks, record, recent positive and
negative evidence) and the transitions into the direction from every element of the recent
prefix (applies-when, rationale, risks, observed rewards and outcomes). It fits a token budget:
the richest rendering that fits is used, the leanest keeps each candidate's pattern and checks
and each edge's rationale. ``guidance`` is the code writer's: direction, the chosen strategy and
the same transitions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from htam.memory.model import Edge, Evidence, LocalNode, NodeStats
from htam.memory.triggers import StateFeatures, Trigger, trigger_prior
from htam.vocab import Direction

if TYPE_CHECKING:
    from htam.memory.store import MemoryBank

CHARS_PER_TOKEN = 4  # BPE tokenizers (GPT, DeepSeek, Qwen) average ~4 characters a token here


@dataclass(frozen=True)
class Detail:
    """How much of each node a rendering shows; DETAILS go from richest to leanest."""

    evidence: int  # records shown per polarity
    excerpt: int  # characters of an error excerpt or lesson
    pattern: int  # characters of a pattern
    checks: int  # validation checks shown
    risks: bool


DETAILS = (
    Detail(evidence=2, excerpt=200, pattern=900, checks=6, risks=True),
    Detail(evidence=1, excerpt=140, pattern=600, checks=4, risks=True),
    Detail(evidence=1, excerpt=80, pattern=360, checks=3, risks=False),
    Detail(evidence=0, excerpt=0, pattern=200, checks=2, risks=False),
)


def estimate_tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: max(limit - 3, 0)] + "..."


def _record(stats: NodeStats) -> str:
    if not stats.tries:
        return "Record: not tried yet."
    return (
        f"Record: {stats.tries} tries, {stats.successes} improved, "
        f"mean reward {stats.mean_reward:+.2f}, trend {stats.ema:+.2f}."
    )


def _speedups(ev: Evidence) -> str:
    if ev.speedup_before is None or ev.speedup_after is None:
        return ev.status
    return f"{ev.speedup_before:.2f}x -> {ev.speedup_after:.2f}x"


def _evidence_line(ev: Evidence, limit: int, target: str | None = None) -> str:
    if ev.polarity == "positive":
        head = "Worked"
    else:  # a correct step within the timing noise or slower is no failure
        head = "No gain" if ev.status == "ok" else "Failed"
    measured = ev.context.get("target")
    # evidence merged in from another target's scope says so: a CPU C++ failure is a hint,
    # not a verdict, for a GPU kernel
    where = f" (measured on {measured})" if target and measured and measured != target else ""
    parts = [f"{head} on {ev.task_signature}{where}: {_speedups(ev)} (reward {ev.reward:+.2f})"]
    if ev.error_excerpt:
        parts.append(f"error: {_cut(ev.error_excerpt, limit)}")
    if ev.lesson:
        parts.append(f"lesson: {_cut(ev.lesson, limit)}")
    return "- " + "; ".join(parts)


def _fit_line(triggers: list[Trigger], state: StateFeatures | None) -> str | None:
    if state is None or not triggers:
        return None
    weight, reasons = trigger_prior(triggers, state)
    if not reasons:
        return "Fits this task: no trigger holds."
    return f"Fits this task ({weight:+.2f}): " + "; ".join(reasons) + "."


def _direction_lines(bank: MemoryBank, direction: str) -> list[str]:
    node = bank.direction(direction)
    lines = [f"Direction: {node.title} ({node.id})", f"Intent: {node.intent}"]
    if node.objectives:
        lines.append("Objectives: " + "; ".join(node.objectives) + ".")
    if node.triggers:
        lines.append("Applies when: " + "; ".join(t.why for t in node.triggers) + ".")
    if node.risks:
        lines.append("Risks: " + "; ".join(node.risks) + ".")
    lines.append(_record(node.stats))
    return lines


def _local_lines(
    bank: MemoryBank,
    node: LocalNode,
    language: str | None,
    state: StateFeatures | None,
    detail: Detail,
    target: str | None = None,
) -> list[str]:
    label = language if language in node.patterns else "general"
    lines = [
        f"Strategy: {node.title} ({node.id})",
        f"Pattern ({label}): {_cut(node.pattern_for(language), detail.pattern)}",
    ]
    if node.checks:
        lines.append("Verify after applying: " + "; ".join(node.checks[: detail.checks]) + ".")
    fit = _fit_line(node.triggers, state)
    if fit:
        lines.append(fit)
    if detail.risks and node.risks:
        lines.append("Risks: " + "; ".join(node.risks) + ".")
    lines.append(_record(node.stats))
    if detail.evidence:
        # the bank's scope's evidence only (htam.memory.scopes): another target's is offered
        # after the user merged it in, never before
        evidence = bank.evidence(node.id)
        best = [ev for ev in evidence if ev.polarity == "positive"][: detail.evidence]
        recent = [ev for ev in evidence if ev.polarity == "negative"][: detail.evidence]
        lines.extend(_evidence_line(ev, detail.excerpt, target) for ev in best + recent)
    return lines


def _edge_lines(
    edge: Edge | None, src: str, dst: str, state: StateFeatures | None, detail: Detail
) -> list[str]:
    head = f"Transition {src} -> {dst}"
    if edge is None:
        return [f"{head}: no prior knowledge or observations."]
    lines = [head + ":"]
    if edge.applies_when:
        lines.append(f"  applies when {edge.applies_when}.")
    if edge.when and state is not None:
        holds = Trigger(edge.when, 0.0, "").matches(state)
        lines.append(f"  its condition {'holds' if holds else 'does not hold'} for this task.")
    if edge.rationale:
        lines.append(f"  rationale: {edge.rationale}.")
    if detail.risks and edge.risks:
        lines.append("  risks: " + "; ".join(edge.risks) + ".")
    stats = edge.stats
    if stats.observed is None:
        seen = "not observed yet"
    else:
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(stats.status_counts.items()))
        seen = (
            f"mean reward {stats.observed:+.2f} over {stats.count} steps ({outcomes}), "
            f"learned advantage {stats.fit:+.2f}"
        )
    lines.append(f"  {seen} (prior {edge.prior_utility:+.2f}).")
    return lines


def _prefix_list(prefix: Sequence[str] | str | None) -> list[str]:
    if prefix is None:
        return []
    return [prefix] if isinstance(prefix, str) else list(prefix)


def _transitions(
    bank: MemoryBank,
    direction: str,
    prefix: Sequence[str] | str | None,
    state: StateFeatures | None,
    detail: Detail,
) -> list[str]:
    """Edges into ``direction`` from the prefix's distinct elements, most recent first."""
    lines: list[str] = []
    for src in dict.fromkeys(reversed(_prefix_list(prefix))):
        lines += _edge_lines(bank.edge(src, direction), src, direction, state, detail)
    return lines


def guidance(
    bank: MemoryBank,
    direction: str,
    local_id: str | None,
    prefix: Sequence[str] | str | None,
    *,
    language: str | None = None,
    state: StateFeatures | None = None,
    target: str | None = None,
) -> str:
    """The code writer's memory: the direction, the chosen strategy and the incoming
    transitions from the recent prefix (a single previous direction may be given as a str)."""
    if direction == Direction.ANY:
        if local_id is None:
            return ""
        direction = bank.parent_of[local_id]
    detail = DETAILS[0]
    sections = [_direction_lines(bank, direction)]
    if local_id is not None:
        node = bank.local(local_id)
        sections.append(_local_lines(bank, node, language, state, detail, target))
    edges = _transitions(bank, direction, prefix, state, detail)
    if edges:
        sections.append(edges)
    return "\n\n".join("\n".join(lines) for lines in sections)


def choice_guidance(
    bank: MemoryBank,
    direction: str,
    candidate_ids: Sequence[str],
    prefix: Sequence[str] | str | None,
    *,
    language: str | None = None,
    state: StateFeatures | None = None,
    budget_tokens: int = 1800,
    target: str | None = None,
) -> str:
    """The strategy choice's memory, at the richest detail within ``budget_tokens``.

    For a flat (no-hierarchy) decision the direction part is left out: the candidates span all
    directions. Over budget even at the leanest detail, the leanest rendering is returned (its
    size is what DETAILS[-1] guarantees: pattern and checks per candidate, rationale per edge).
    """
    nodes = [bank.local(i) for i in candidate_ids]
    text = ""
    for detail in DETAILS:
        sections = []
        if direction != Direction.ANY:
            sections.append("\n".join(_direction_lines(bank, direction)))
            edges = _transitions(bank, direction, prefix, state, detail)
            if edges:
                sections.append("Transitions into it from the recent path:\n" + "\n".join(edges))
        blocks = [
            "\n".join(_local_lines(bank, node, language, state, detail, target)) for node in nodes
        ]
        sections.append("Candidate strategies, with their memory:\n\n" + "\n\n".join(blocks))
        text = "\n\n".join(sections)
        if estimate_tokens(text) <= budget_tokens:
            return text
    return text
