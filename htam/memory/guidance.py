"""A compact text rendering of the memory around one decision, for LLM prompts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from htam.memory.model import Edge, Evidence, NodeStats
from htam.policy.features import FLAT_DIRECTION

if TYPE_CHECKING:
    from htam.memory.store import MemoryBank

EXCERPT_CHARS = 200  # per evidence line: prompts stay short


def _record(stats: NodeStats) -> str:
    if not stats.tries:
        return "Record: not tried yet."
    return (
        f"Record: {stats.tries} tries, {stats.successes} improved, "
        f"mean reward {stats.mean_reward:+.2f}, trend {stats.ema:+.2f}."
    )


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 3] + "..."


def _speedups(ev: Evidence) -> str:
    if ev.speedup_before is None or ev.speedup_after is None:
        return ev.status
    return f"{ev.speedup_before:.2f}x -> {ev.speedup_after:.2f}x"


def _evidence_line(ev: Evidence) -> str:
    head = "Worked" if ev.polarity == "positive" else "Failed"
    parts = [f"{head} on {ev.task_signature}: {_speedups(ev)} (reward {ev.reward:+.2f})"]
    if ev.error_excerpt:
        parts.append(f"error: {_short(ev.error_excerpt)}")
    if ev.lesson:
        parts.append(f"lesson: {_short(ev.lesson)}")
    return "- " + "; ".join(parts)


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


def _local_lines(bank: MemoryBank, local_id: str) -> list[str]:
    node = bank.local(local_id)
    lines = [f"Strategy: {node.title} ({node.id})", f"Pattern: {node.pattern}"]
    if node.checks:
        lines.append("Verify after applying: " + "; ".join(node.checks) + ".")
    if node.risks:
        lines.append("Risks: " + "; ".join(node.risks) + ".")
    lines.append(_record(node.stats))
    evidence = bank.evidence(local_id)
    best = [ev for ev in evidence if ev.polarity == "positive"][:1]
    worst = [ev for ev in evidence if ev.polarity == "negative"][:1]
    lines.extend(_evidence_line(ev) for ev in best + worst)
    return lines


def _edge_lines(edge: Edge | None, src: str, dst: str) -> list[str]:
    head = f"Transition {src} -> {dst}"
    if edge is None:
        return [f"{head}: no prior knowledge or observations."]
    lines = [head + ":"]
    if edge.applies_when:
        lines.append(f"  applies when {edge.applies_when}.")
    if edge.rationale:
        lines.append(f"  rationale: {edge.rationale}.")
    if edge.risks:
        lines.append("  risks: " + "; ".join(edge.risks) + ".")
    observed = edge.stats.observed
    seen = (
        f"mean reward {observed:+.2f} over {edge.stats.count} steps, "
        f"learned advantage {edge.stats.fit:+.2f}"
        if observed is not None
        else "not observed yet"
    )
    lines.append(f"  {seen} (prior {edge.prior_utility:+.2f}).")
    return lines


def guidance(
    bank: MemoryBank, direction: str, local_id: str | None, prev_direction: str | None
) -> str:
    """Render the chosen direction, its chosen local strategy and the incoming transition."""
    if direction == FLAT_DIRECTION:
        if local_id is None:
            return ""
        direction = bank.parent_of[local_id]
    sections = [_direction_lines(bank, direction)]
    if local_id is not None:
        sections.append(_local_lines(bank, local_id))
    if prev_direction is not None:
        sections.append(
            _edge_lines(bank.edge(prev_direction, direction), prev_direction, direction)
        )
    return "\n\n".join("\n".join(lines) for lines in sections)
