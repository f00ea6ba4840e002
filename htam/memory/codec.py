"""Conversions of nodes, edges and evidence between dataclasses, JSON dicts and SQLite rows."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import fields
from typing import Any

from htam.memory.model import (
    Edge,
    EdgeStats,
    Evidence,
    GlobalNode,
    LocalNode,
    NodeStats,
    check_local,
)
from htam.memory.triggers import Trigger

# The seed's columns of each table; a node's or edge's statistics are those of one scope
# (htam.memory.scopes), joined in by the *_SELECT queries (":scope" names it).
GLOBAL_COLUMNS = "id, title, intent, objectives, triggers, risks"
LOCAL_COLUMNS = (
    "id, direction, title, description, pattern, checks, op_families, triggers, risks, patterns"
)
EDGE_COLUMNS = "src, dst, applies_when, rationale, risks, prior_utility, condition"
EVIDENCE_COLUMNS = (
    "run_id, task_id, step, local_id, polarity, task_signature, status, "
    "speedup_before, speedup_after, reward, error_excerpt, lesson, recorded_at, context, scope"
)
_STATS = (
    "coalesce(s.tries, 0), coalesce(s.successes, 0), coalesce(s.reward_sum, 0), "
    "coalesce(s.ema, 0), coalesce(s.status_counts, '{}')"
)
GLOBAL_SELECT = (
    f"SELECT n.id, n.title, n.intent, n.objectives, n.triggers, n.risks, {_STATS} "
    "FROM global_nodes n LEFT JOIN node_stats s ON s.node = n.id AND s.scope = :scope"
)
LOCAL_SELECT = (
    "SELECT n.id, n.direction, n.title, n.description, n.pattern, n.checks, n.op_families, "
    f"n.triggers, n.risks, {_STATS}, n.patterns "
    "FROM local_nodes n LEFT JOIN node_stats s ON s.node = n.id AND s.scope = :scope"
)


# What edge_select reads of a seed edge (e) with the scope's statistics (s), and of an edge only
# the scope has: every column (edge_from_row), or the numbers the policy scores (EdgeView).
_EDGE_FULL = (
    "e.src, e.dst, e.applies_when, e.rationale, e.risks, e.prior_utility, "
    "coalesce(s.count, 0), coalesce(s.weight_sum, 0), coalesce(s.reward_wsum, 0), "
    "coalesce(s.fit, e.prior_utility), coalesce(s.status_counts, '{}'), e.condition",
    "s.src, s.dst, '', '', '[]', 0, s.count, s.weight_sum, s.reward_wsum, s.fit, "
    "s.status_counts, '{}'",
)
_EDGE_VIEW = (
    "e.src, e.dst, coalesce(s.fit, e.prior_utility), coalesce(s.count, 0), "
    "coalesce(s.weight_sum, 0), coalesce(s.reward_wsum, 0), e.prior_utility",
    "s.src, s.dst, s.fit, s.count, s.weight_sum, s.reward_wsum, 0",
)


def edge_select(where: str = "1", view: bool = False) -> str:
    """Seed edges with the scope's statistics (a seed edge not yet taken fits its prior), then
    the edges the scope learned that the seed does not have. Rows as ``edge_from_row`` reads
    them, or with ``view`` (src, dst, then EdgeView's fields). ``where`` is a condition on
    ``{t}.src`` and ``{t}.dst``, applied inside both branches so that the keys serve it."""
    seeded, learned = _EDGE_VIEW if view else _EDGE_FULL
    return (
        f"SELECT {seeded} FROM edges e LEFT JOIN edge_stats s "
        f"ON s.src = e.src AND s.dst = e.dst AND s.scope = :scope WHERE {where.format(t='e')} "
        f"UNION ALL SELECT {learned} FROM edge_stats s "
        f"WHERE s.scope = :scope AND {where.format(t='s')} "
        "AND NOT EXISTS (SELECT 1 FROM edges e WHERE e.src = s.src AND e.dst = s.dst)"
    )


SOURCES_IN = "{t}.src IN (SELECT value FROM json_each(:srcs))"  # :srcs a JSON list


def _triggers(data: list[dict[str, Any]]) -> list[Trigger]:
    return [Trigger.from_dict(item) for item in data]


def _condition(when: dict[str, Any]) -> dict[str, Any]:
    """An edge's condition, validated as a trigger's (unknown keys or values raise)."""
    Trigger.from_dict({"if": when, "weight": 0.0})
    return dict(when)


def _node_stats(row: sqlite3.Row, start: int) -> NodeStats:
    tries, successes, reward_sum, ema, counts = row[start : start + 5]
    return NodeStats(tries, successes, reward_sum, ema, json.loads(counts))


def global_from_row(row: sqlite3.Row) -> GlobalNode:
    return GlobalNode(
        id=row[0],
        title=row[1],
        intent=row[2],
        objectives=json.loads(row[3]),
        triggers=_triggers(json.loads(row[4])),
        risks=json.loads(row[5]),
        stats=_node_stats(row, 6),
    )


def local_from_row(row: sqlite3.Row) -> LocalNode:
    return LocalNode(
        id=row[0],
        direction=row[1],
        title=row[2],
        description=row[3],
        pattern=row[4],
        checks=json.loads(row[5]),
        op_families=json.loads(row[6]),
        triggers=_triggers(json.loads(row[7])),
        risks=json.loads(row[8]),
        stats=_node_stats(row, 9),
        patterns=json.loads(row[14]),
    )


def edge_from_row(row: sqlite3.Row) -> Edge:
    return Edge(
        src=row[0],
        dst=row[1],
        applies_when=row[2],
        rationale=row[3],
        risks=json.loads(row[4]),
        prior_utility=row[5],
        stats=EdgeStats(row[6], row[7], row[8], row[9], json.loads(row[10])),
        when=json.loads(row[11]),
    )


def evidence_from_row(row: sqlite3.Row) -> Evidence:
    # the columns in the fields' order, the context (JSON) and the scope last
    data = dict(zip([f.name for f in fields(Evidence)], row, strict=True))
    data["context"] = json.loads(data["context"] or "{}")
    return Evidence(**data)


def global_to_dict(node: GlobalNode) -> dict[str, Any]:
    return {
        "id": node.id,
        "title": node.title,
        "intent": node.intent,
        "objectives": node.objectives,
        "triggers": [t.to_dict() for t in node.triggers],
        "risks": node.risks,
    }


def global_from_dict(data: dict[str, Any]) -> GlobalNode:
    return GlobalNode(
        id=data["id"],
        title=data["title"],
        intent=data["intent"],
        objectives=list(data.get("objectives", [])),
        triggers=_triggers(data.get("triggers", [])),
        risks=list(data.get("risks", [])),
        stats=NodeStats.from_dict(data.get("stats")),
    )


def local_to_dict(node: LocalNode) -> dict[str, Any]:
    return {
        "id": node.id,
        "direction": node.direction,
        "title": node.title,
        "description": node.description,
        "pattern": node.pattern,
        "patterns": node.patterns,
        "checks": node.checks,
        "op_families": node.op_families,
        "triggers": [t.to_dict() for t in node.triggers],
        "risks": node.risks,
    }


def local_from_dict(data: dict[str, Any]) -> LocalNode:
    node = LocalNode(
        id=data["id"],
        direction=data["direction"],
        title=data["title"],
        description=data["description"],
        pattern=data["pattern"],
        patterns=dict(data.get("patterns", {})),
        checks=list(data.get("checks", [])),
        op_families=list(data.get("op_families", [])),
        triggers=_triggers(data.get("triggers", [])),
        risks=list(data.get("risks", [])),
        stats=NodeStats.from_dict(data.get("stats")),
    )
    check_local(node)
    return node


def edge_to_dict(edge: Edge) -> dict[str, Any]:
    return {
        "src": edge.src,
        "dst": edge.dst,
        "applies_when": edge.applies_when,
        "rationale": edge.rationale,
        "risks": edge.risks,
        "prior_utility": edge.prior_utility,
        "when": edge.when,
    }


def edge_from_dict(data: dict[str, Any]) -> Edge:
    prior = float(data.get("prior_utility", 0.0))
    stats = data.get("stats")
    return Edge(
        src=data["src"],
        dst=data["dst"],
        applies_when=data.get("applies_when", ""),
        rationale=data.get("rationale", ""),
        risks=list(data.get("risks", [])),
        prior_utility=prior,
        when=_condition(data.get("when", {})),
        # a seed edge has no statistics yet: its fit starts at the prior
        stats=EdgeStats.from_dict(stats) if stats else EdgeStats(fit=prior),
    )


def insert_global(conn: sqlite3.Connection, node: GlobalNode, ord_: int) -> None:
    conn.execute(
        f"INSERT INTO global_nodes (ord, {GLOBAL_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            ord_,
            node.id,
            node.title,
            node.intent,
            json.dumps(node.objectives),
            json.dumps([t.to_dict() for t in node.triggers]),
            json.dumps(node.risks),
        ),
    )


def insert_local(conn: sqlite3.Connection, node: LocalNode, ord_: int) -> None:
    conn.execute(
        f"INSERT INTO local_nodes (ord, {LOCAL_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            ord_,
            node.id,
            node.direction,
            node.title,
            node.description,
            node.pattern,
            json.dumps(node.checks),
            json.dumps(node.op_families),
            json.dumps([t.to_dict() for t in node.triggers]),
            json.dumps(node.risks),
            json.dumps(node.patterns, sort_keys=True),
        ),
    )


def insert_edge(conn: sqlite3.Connection, edge: Edge) -> None:
    conn.execute(
        f"INSERT INTO edges ({EDGE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            edge.src,
            edge.dst,
            edge.applies_when,
            edge.rationale,
            json.dumps(edge.risks),
            edge.prior_utility,
            json.dumps(edge.when, sort_keys=True),
        ),
    )


def insert_node_stats(conn: sqlite3.Connection, scope: str, node: str, s: NodeStats) -> None:
    conn.execute(
        "INSERT INTO node_stats (scope, node, tries, successes, reward_sum, ema, status_counts) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (scope, node, s.tries, s.successes, s.reward_sum, s.ema,
         json.dumps(s.status_counts, sort_keys=True)),
    )  # fmt: skip


def insert_edge_stats(
    conn: sqlite3.Connection, scope: str, src: str, dst: str, s: EdgeStats
) -> None:
    conn.execute(
        "INSERT INTO edge_stats (scope, src, dst, count, weight_sum, reward_wsum, fit, "
        "status_counts) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (scope, src, dst, s.count, s.weight_sum, s.reward_wsum, s.fit,
         json.dumps(s.status_counts, sort_keys=True)),
    )  # fmt: skip


def insert_evidence(conn: sqlite3.Connection, ev: Evidence) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO evidence (" + EVIDENCE_COLUMNS + ") "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            ev.run_id,
            ev.task_id,
            ev.step,
            ev.local_id,
            ev.polarity,
            ev.task_signature,
            ev.status,
            ev.speedup_before,
            ev.speedup_after,
            ev.reward,
            ev.error_excerpt,
            ev.lesson,
            ev.recorded_at,
            json.dumps(ev.context, sort_keys=True),
            ev.scope,
        ),
    )
