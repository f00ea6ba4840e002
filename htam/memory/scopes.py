"""Scopes: what a bank learned, kept apart per target (schema version 5).

A bank's seed knowledge (directions, strategies, the transitions' text and priors) is shared by
every run. What runs learned (node and edge statistics, evidence, the step ledger, the flat
baseline's experiences) lives in the scope of the target it was measured on: ``cpu`` or
``cuda``. A scope names a target, not a GPU model: the target fixes the device class (a host
CPU, an NVIDIA GPU), while H100 and H200 runs of one study should teach each other; the model
is in each record's context. A CPU run teaches a GPU run only through :func:`merge_scope`,
which the user asks for (``htam memory merge-scope``).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections import Counter

from htam.memory.model import EdgeStats, NodeStats
from htam.memory.updates import prune_evidence
from htam.vocab import Target

DEFAULT_SCOPE = str(Target.CPU)  # a run's target defaults to the CPU (OptimizeConfig)
# Statistics learned before scopes by runs on more than one target, or on an unknown one: they
# cannot be split, so they are kept apart until the user merges them into a scope.
LEGACY_SCOPE = "unscoped"
SHARED = ""  # the flat baseline's seed records: knowledge, not a measurement

STATS_COLUMNS = "tries, successes, reward_sum, ema, status_counts"
EDGE_STATS_COLUMNS = "count, weight_sum, reward_wsum, fit, status_counts"

_TABLES = """
CREATE TABLE node_stats (
    scope TEXT NOT NULL, node TEXT NOT NULL,
    tries INTEGER NOT NULL DEFAULT 0, successes INTEGER NOT NULL DEFAULT 0,
    reward_sum REAL NOT NULL DEFAULT 0, ema REAL NOT NULL DEFAULT 0,
    status_counts TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (scope, node)
) WITHOUT ROWID;
CREATE TABLE edge_stats (
    scope TEXT NOT NULL,
    src TEXT NOT NULL REFERENCES global_nodes(id), dst TEXT NOT NULL REFERENCES global_nodes(id),
    count INTEGER NOT NULL DEFAULT 0, weight_sum REAL NOT NULL DEFAULT 0,
    reward_wsum REAL NOT NULL DEFAULT 0, fit REAL NOT NULL DEFAULT 0,
    status_counts TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (scope, src, dst)
) WITHOUT ROWID;
CREATE TABLE scope_merges (
    from_scope TEXT NOT NULL, into_scope TEXT NOT NULL, merged_at REAL NOT NULL,
    PRIMARY KEY (from_scope, into_scope)
) WITHOUT ROWID;
ALTER TABLE steps ADD COLUMN scope TEXT NOT NULL DEFAULT '';
CREATE TABLE evidence_scoped (
    scope TEXT NOT NULL,
    run_id TEXT NOT NULL, task_id TEXT NOT NULL, step INTEGER NOT NULL,
    local_id TEXT NOT NULL REFERENCES local_nodes(id), polarity TEXT NOT NULL,
    task_signature TEXT NOT NULL, status TEXT NOT NULL,
    speedup_before REAL, speedup_after REAL, reward REAL NOT NULL,
    error_excerpt TEXT NOT NULL, lesson TEXT NOT NULL, recorded_at REAL NOT NULL,
    context TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (scope, run_id, task_id, step)
);
CREATE TABLE flat_scoped (
    scope TEXT NOT NULL,
    run_id TEXT NOT NULL, task_id TEXT NOT NULL, step INTEGER NOT NULL,
    text TEXT NOT NULL, record TEXT NOT NULL, added_at REAL NOT NULL,
    PRIMARY KEY (scope, run_id, task_id, step)
)
"""

_MOVE = """
INSERT INTO evidence_scoped SELECT
    coalesce(nullif(json_extract(context, '$.target'), ''), :legacy),
    run_id, task_id, step, local_id, polarity, task_signature, status, speedup_before,
    speedup_after, reward, error_excerpt, lesson, recorded_at, context FROM evidence;
DROP TABLE evidence;
ALTER TABLE evidence_scoped RENAME TO evidence;
CREATE INDEX evidence_by_local ON evidence(scope, local_id, polarity);
INSERT INTO flat_scoped SELECT
    CASE WHEN run_id = 'seed' THEN '' ELSE
    coalesce(nullif(json_extract(record, '$.context.target'), ''), :legacy) END,
    run_id, task_id, step, text, record, added_at FROM flat_experiences;
DROP TABLE flat_experiences;
ALTER TABLE flat_scoped RENAME TO flat_experiences;
UPDATE steps SET scope = :legacy;
INSERT INTO node_stats (scope, node, tries, successes, reward_sum, ema, status_counts)
    SELECT :legacy, id, tries, successes, reward_sum, ema, status_counts FROM global_nodes
    WHERE tries > 0;
INSERT INTO node_stats (scope, node, tries, successes, reward_sum, ema, status_counts)
    SELECT :legacy, id, tries, successes, reward_sum, ema, status_counts FROM local_nodes
    WHERE tries > 0;
INSERT INTO edge_stats (scope, src, dst, count, weight_sum, reward_wsum, fit, status_counts)
    SELECT :legacy, src, dst, count, weight_sum, reward_wsum, fit, status_counts FROM edges
    WHERE count > 0 OR fit != prior_utility
"""


def _statements(script: str) -> list[str]:
    return [part.strip() for part in script.split(";") if part.strip()]


def legacy_scope(targets: list[str]) -> str:
    """The scope of statistics learned before scopes, from the targets of the steps behind
    them ("" where a step did not say): that target when all said one, else LEGACY_SCOPE."""
    known = set(targets)
    if len(known) == 1 and "" not in known:
        return known.pop()
    return LEGACY_SCOPE if known else DEFAULT_SCOPE


def to_scopes(conn: sqlite3.Connection) -> None:
    """Migration to version 5: statistics, evidence, ledger and flat experiences get a scope.

    The statistics of versions 1-4 stay in their old columns, unread from now on; the
    statistics tables hold them under the scope :func:`legacy_scope` names.
    """
    targets = [
        row[0] or ""
        for row in conn.execute("SELECT DISTINCT json_extract(context, '$.target') FROM steps")
    ]
    legacy = legacy_scope(targets)
    for statement in _statements(_TABLES):
        conn.execute(statement)
    for statement in _statements(_MOVE):
        conn.execute(statement, {"legacy": legacy} if ":legacy" in statement else {})


def scope_counts(conn: sqlite3.Connection) -> dict[str, tuple[int, int, int]]:
    """(steps, node tries, evidence records) of every scope that holds something."""
    found: dict[str, list[int]] = {}
    queries = (
        "SELECT scope, count(*) FROM steps GROUP BY scope",
        "SELECT scope, sum(tries) FROM node_stats GROUP BY scope",
        "SELECT scope, count(*) FROM evidence GROUP BY scope",
    )
    for column, query in enumerate(queries):
        for scope, n in conn.execute(query):
            found.setdefault(scope, [0, 0, 0])[column] = n or 0
    return {scope: (a, b, c) for scope, (a, b, c) in sorted(found.items())}


def home_scope(conn: sqlite3.Connection) -> str:
    """The scope a bank opened without one reads (inspection, reports): the one holding the
    most steps, else the default."""
    row = conn.execute(
        "SELECT scope FROM steps GROUP BY scope ORDER BY count(*) DESC, scope LIMIT 1"
    ).fetchone()
    return row[0] if row and row[0] else DEFAULT_SCOPE


def add_node_stats(a: NodeStats, b: NodeStats) -> NodeStats:
    """Tries, successes, rewards and outcomes add; the EMA trend is the tries-weighted mean."""
    tries = a.tries + b.tries
    ema = (a.tries * a.ema + b.tries * b.ema) / tries if tries else 0.0
    counts = Counter(a.status_counts) + Counter(b.status_counts)
    return NodeStats(
        tries, a.successes + b.successes, a.reward_sum + b.reward_sum, ema, dict(counts)
    )


def add_edge_stats(a: EdgeStats, b: EdgeStats) -> EdgeStats:
    """Sums add; the fitted advantage is the evidence-weighted mean of both fits."""
    counts = Counter(a.status_counts) + Counter(b.status_counts)
    weight = a.weight_sum + b.weight_sum
    fit = (a.fit * a.weight_sum + b.fit * b.weight_sum) / weight if weight > 0 else a.fit
    return EdgeStats(a.count + b.count, weight, a.reward_wsum + b.reward_wsum, fit, dict(counts))


class ScopeMergeError(ValueError):
    """A merge of scopes that would count a scope's learning twice, or merge nothing."""


def merge_scope(conn: sqlite3.Connection, source: str, into: str, keep: int) -> dict[str, int]:
    """Add what scope ``source`` learned to scope ``into`` (inside the caller's transaction):
    statistics add (as :func:`add_node_stats` and :func:`add_edge_stats`), evidence and flat
    experiences are copied (each record keeps its context: what it was measured on), and the
    evidence stays bounded by ``keep`` per strategy and polarity. The ledger stays in
    ``source``. Returns what was copied; a pair merged before is refused (it would count
    ``source``'s learning twice)."""
    if source == into:
        raise ScopeMergeError(f"scope {source!r} merged into itself")
    if not scope_counts(conn).get(source):
        raise ScopeMergeError(f"scope {source!r} holds nothing to merge")
    done = conn.execute(
        "SELECT merged_at FROM scope_merges WHERE from_scope = ? AND into_scope = ?",
        (source, into),
    ).fetchone()
    if done is not None:
        when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(done[0]))
        raise ScopeMergeError(
            f"scope {source!r} was merged into {into!r} already ({when} UTC): merging it "
            "again would count its learning twice"
        )
    nodes = _merge_nodes(conn, source, into)
    edges = _merge_edges(conn, source, into)
    evidence = _copy_rows(conn, "evidence", source, into)
    flat = _copy_rows(conn, "flat_experiences", source, into)
    groups = conn.execute(
        "SELECT DISTINCT local_id, polarity FROM evidence WHERE scope = ?", (into,)
    ).fetchall()
    for local_id, polarity in groups:
        prune_evidence(conn, local_id, polarity, keep, into)
    conn.execute(
        "INSERT INTO scope_merges (from_scope, into_scope, merged_at) VALUES (?, ?, ?)",
        (source, into, time.time()),
    )
    return {"nodes": nodes, "edges": edges, "evidence": evidence, "flat": flat}


def _node_rows(conn: sqlite3.Connection, scope: str) -> dict[str, NodeStats]:
    rows = conn.execute(f"SELECT node, {STATS_COLUMNS} FROM node_stats WHERE scope = ?", (scope,))
    return {r[0]: NodeStats(r[1], r[2], r[3], r[4], json.loads(r[5])) for r in rows}


def _merge_nodes(conn: sqlite3.Connection, source: str, into: str) -> int:
    mine = _node_rows(conn, into)
    theirs = _node_rows(conn, source)
    for node, stats in theirs.items():
        total = add_node_stats(mine[node], stats) if node in mine else stats
        conn.execute(
            f"INSERT OR REPLACE INTO node_stats (scope, node, {STATS_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (into, node, total.tries, total.successes, total.reward_sum, total.ema,
             json.dumps(total.status_counts, sort_keys=True)),
        )  # fmt: skip
    return len(theirs)


def _edge_rows(conn: sqlite3.Connection, scope: str) -> dict[tuple[str, str], EdgeStats]:
    rows = conn.execute(
        f"SELECT src, dst, {EDGE_STATS_COLUMNS} FROM edge_stats WHERE scope = ?", (scope,)
    )
    return {(r[0], r[1]): EdgeStats(r[2], r[3], r[4], r[5], json.loads(r[6])) for r in rows}


def _merge_edges(conn: sqlite3.Connection, source: str, into: str) -> int:
    mine = _edge_rows(conn, into)
    theirs = _edge_rows(conn, source)
    for (src, dst), stats in theirs.items():
        total = add_edge_stats(mine[(src, dst)], stats) if (src, dst) in mine else stats
        conn.execute(
            f"INSERT OR REPLACE INTO edge_stats (scope, src, dst, {EDGE_STATS_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (into, src, dst, total.count, total.weight_sum, total.reward_wsum, total.fit,
             json.dumps(total.status_counts, sort_keys=True)),
        )  # fmt: skip
    return len(theirs)


def _copy_rows(conn: sqlite3.Connection, table: str, source: str, into: str) -> int:
    columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})") if row[1] != "scope"]
    names = ", ".join(columns)
    cursor = conn.execute(
        f"INSERT OR IGNORE INTO {table} (scope, {names}) "
        f"SELECT ?, {names} FROM {table} WHERE scope = ?",
        (into, source),
    )
    return cursor.rowcount
