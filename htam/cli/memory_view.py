"""What ``htam memory show`` prints of a bank: its directions with their statistics, the
strongest transitions, and the local strategies tried or with evidence (or, with ``--json``, the
same as one labelled object)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table

if TYPE_CHECKING:  # the commands import the bank when they run: `htam --help` stays light
    from htam.memory import MemoryBank


def show_json(bank: MemoryBank, path: Path, top: int) -> dict[str, Any]:
    """What `show` prints, labelled: the directions, the strongest transitions, the strategies."""
    from htam.policy import PolicyConfig
    from htam.policy.scoring import edge_utilities

    utilities = edge_utilities(bank, PolicyConfig())
    strongest = sorted(utilities, key=lambda key: (-abs(utilities[key]), key))[:top]
    edges = {(e.src, e.dst): e for e in bank.edges()}
    return {
        "bank": str(path),
        "steps": bank.step_count(),
        "directions": [{"id": n.id, **_stats(n.stats)} for n in bank.directions()],
        "transitions": [
            {
                "src": src,
                "dst": dst,
                "utility": utilities[src, dst],
                "observed": edges[src, dst].stats.observed,
                "steps": edges[src, dst].stats.count,
                "prior": edges[src, dst].prior_utility,
                "outcomes": dict(edges[src, dst].stats.status_counts),
            }
            for src, dst in strongest
        ],
        "strategies": [
            {"id": n.id, "direction": bank.parent_of[n.id], **_stats(n.stats)}
            for n in bank.all_locals()
        ],
    }


def _stats(s) -> dict[str, Any]:
    return {
        "tries": s.tries,
        "improved": s.successes,
        "mean_reward": s.mean_reward,
        "trend": s.ema if s.tries else None,
        "outcomes": dict(s.status_counts),
    }


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:+.3f}"


def directions_table(bank: MemoryBank) -> Table:
    table = Table(title="Directions")
    table.add_column("direction", no_wrap=True)
    for column in ("tries", "improved", "mean reward", "trend (EMA)", "failures"):
        table.add_column(column, justify="right")
    for node in bank.directions():
        s = node.stats
        failures = sum(n for status, n in s.status_counts.items() if status != "ok")
        table.add_row(
            node.id, str(s.tries), str(s.successes), _fmt(s.mean_reward),
            _fmt(s.ema if s.tries else None), str(failures),
        )  # fmt: skip
    return table


def edges_table(bank: MemoryBank, top: int) -> Table:
    from htam.policy import PolicyConfig
    from htam.policy.scoring import edge_utilities

    utilities = edge_utilities(bank, PolicyConfig())
    edges = {(e.src, e.dst): e for e in bank.edges()}
    strongest = sorted(utilities, key=lambda key: (-abs(utilities[key]), key))[:top]
    table = Table(title=f"Strongest transitions (top {top} by |utility|)")
    for column in ("transition", "utility", "observed", "steps", "prior", "outcomes"):
        table.add_column(
            column, justify="left" if column in ("transition", "outcomes") else "right"
        )
    for key in strongest:
        e = edges[key]
        outcomes = ", ".join(f"{k}={v}" for k, v in sorted(e.stats.status_counts.items()))
        table.add_row(
            f"{e.src} -> {e.dst}", _fmt(utilities[key]), _fmt(e.stats.observed),
            str(e.stats.count), _fmt(e.prior_utility), outcomes or "-",
        )  # fmt: skip
    return table


def locals_table(bank: MemoryBank, every: bool) -> Table:
    counts = dict(
        bank.connection.execute(
            "SELECT local_id || '/' || polarity, count(*) FROM evidence GROUP BY 1"
        ).fetchall()
    )
    nodes = bank.all_locals()
    known = {key.split("/")[0] for key in counts}
    shown = [n for n in nodes if every or n.stats.tries or n.id in known]
    untried = len(nodes) - len(shown)
    table = Table(
        title="Local strategies" + ("" if every else " (tried, or with evidence)"),
        caption=f"{untried} more never tried: --all lists them" if untried else None,
    )
    table.add_column("strategy", no_wrap=True)
    for column in ("tries", "improved", "mean reward", "evidence +", "evidence -"):
        table.add_column(column, justify="right")
    for node in shown:
        s = node.stats
        table.add_row(
            node.id, str(s.tries), str(s.successes), _fmt(s.mean_reward),
            str(counts.get(f"{node.id}/positive", 0)), str(counts.get(f"{node.id}/negative", 0)),
        )  # fmt: skip
    return table
