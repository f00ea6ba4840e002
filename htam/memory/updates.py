"""Persisting one step: statistics, bounded evidence and position-weighted edge updates.

What to learn is the policy's: an :class:`UpdateRule` (``htam.policy.PolicyConfig`` is one)
gives the prefix weights, the prediction error of the step and each edge's new fit (the LMS rule
of htam.policy.fitting), and the constants of the EMA trend and of the evidence bound. This
module reads the numbers the rule needs from the bank and writes what it returns; it holds no
constant and no formula of the rule.

Every statistic, evidence record and ledger line goes to the scope of the target the step was
measured on (htam.memory.scopes); the seed's nodes and edges are never written.

Everything here runs inside the caller's write transaction, so a step is recorded entirely or
not at all, and the ``steps`` ledger's primary key makes recording idempotent per
(run, task, step).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Protocol

from htam.memory.codec import SOURCES_IN, edge_select
from htam.memory.model import StepRecord
from htam.status import Status

EXCERPT_LIMIT = 600  # characters of an error excerpt kept in evidence
LESSON_LIMIT = 400

_COUNT_STATUS = (
    "status_counts = json_set(status_counts, '$.' || :status, "
    "coalesce(json_extract(status_counts, '$.' || :status), 0) + 1)"
)
_NODE_UPDATE = (
    "tries = tries + 1, successes = successes + :success, reward_sum = reward_sum + :reward, "
    # SQLite evaluates every right-hand side on the old row, so tries = 0 means "first reward".
    "ema = CASE WHEN tries = 0 THEN :reward ELSE (1 - :alpha) * ema + :alpha * :reward END, "
    + _COUNT_STATUS
)
# Positive evidence: the largest gains first. Negative: the most recent failures first (the
# memory changes, so recent mistakes are the ones worth warning about). Ties by key.
_RANK = {
    "positive": "reward DESC, recorded_at DESC, run_id, task_id, step",
    "negative": "recorded_at DESC, reward ASC, run_id, task_id, step",
}


class UpdateRule(Protocol):
    """What the memory needs of the policy to learn from a step."""

    # read-only properties: the policy's configuration is a frozen model
    @property
    def K(self) -> int:  # noqa: N802 - the paper's name
        """Prefix elements a step without explicit weights keeps."""
        ...

    @property
    def ema_alpha(self) -> float:
        """Smoothing of a node's reward trend."""
        ...

    @property
    def evidence_keep(self) -> int:
        """Evidence records kept per local strategy and polarity."""
        ...

    def prefix_weights(self, n: int) -> list[float]:
        """Weights of an n-element prefix, aligned with it (most recent last)."""
        ...

    def prediction_error(
        self, reward: float, tries: int, reward_sum: float, weighted_fits: list[tuple[float, float]]
    ) -> float:
        """The reward minus what the direction (its tries, reward sum) and the edges predicted."""
        ...

    def fitted(self, fit: float, weight_sum: float, weight: float, error: float) -> float:
        """An edge's fit after an update of ``weight`` (``weight_sum``: its total before it)."""
        ...


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def scope_of(record: StepRecord, default: str) -> str:
    """The scope a step is learned into: the target it was measured on, else ``default``."""
    return record.context.get("target") or default


def apply_step(
    conn: sqlite3.Connection,
    record: StepRecord,
    weights: list[float],
    rule: UpdateRule,
    now: float,
    default_scope: str,
) -> bool:
    """Record ``record``; False (and no change) when its key is already in the ledger, or when
    its candidate was learned from under another key (a rerun served from the cache)."""
    status = str(Status(record.status))
    scope = scope_of(record, default_scope)
    if not claim(conn, record, "graph"):
        return False
    cursor = conn.execute(
        "INSERT OR IGNORE INTO steps (run_id, task_id, step, task_signature, direction, "
        "local_id, status, reward, prefix, weights, speedup_before, speedup_after, recorded_at, "
        "context, scope) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            record.run_id,
            record.task_id,
            record.step,
            record.task_signature,
            record.direction,
            record.local_id,
            status,
            record.reward,
            json.dumps(record.prefix),
            json.dumps(weights),
            record.speedup_before,
            record.speedup_after,
            now,
            json.dumps(record.context, sort_keys=True),
            scope,
        ),
    )
    if cursor.rowcount == 0:
        return False
    error = _prediction_error(conn, record, weights, rule, scope)  # before the statistics move
    params = {
        "success": int(record.success),
        "reward": record.reward,
        "alpha": rule.ema_alpha,
        "status": status,
        "scope": scope,
    }
    nodes = [record.direction] + ([record.local_id] if record.local_id is not None else [])
    for node in nodes:
        conn.execute("INSERT OR IGNORE INTO node_stats (scope, node) VALUES (?, ?)", (scope, node))
        conn.execute(
            f"UPDATE node_stats SET {_NODE_UPDATE} WHERE scope = :scope AND node = :id",
            params | {"id": node},
        )
    if record.local_id is not None:
        _add_evidence(conn, record, record.local_id, status, now, rule.evidence_keep, scope)
    for src, weight in zip(record.prefix, weights, strict=True):
        if weight > 0:
            _update_edge(conn, src, record.direction, weight, record, error, rule, scope)
    return True


def claim(conn: sqlite3.Connection, record: StepRecord, store: str) -> bool:
    """Mark ``record``'s candidate as learned from in ``store`` ("graph" or "flat"); False when
    a step under another key learned from it already. A record without a digest (written
    before candidates had one) is always new."""
    if not record.code_digest:
        return True
    row = conn.execute(
        "SELECT run_id, task_id, step FROM learned_candidates WHERE digest = ? AND store = ?",
        (record.code_digest, store),
    ).fetchone()
    if row is not None:
        return tuple(row) == record.key
    conn.execute(
        "INSERT INTO learned_candidates (digest, store, run_id, task_id, step) "
        "VALUES (?, ?, ?, ?, ?)",
        (record.code_digest, store, *record.key),
    )
    return True


def _prediction_error(
    conn: sqlite3.Connection,
    record: StepRecord,
    weights: list[float],
    rule: UpdateRule,
    scope: str,
) -> float:
    """The rule's prediction error of the step, from the scope's numbers before it."""
    row = conn.execute(
        "SELECT tries, reward_sum FROM node_stats WHERE scope = ? AND node = ?",
        (scope, record.direction),
    ).fetchone()
    tries, reward_sum = row if row else (0, 0.0)
    where = SOURCES_IN + " AND {t}.dst = :dst"
    rows = conn.execute(
        edge_select(where, view=True),
        {"scope": scope, "dst": record.direction, "srcs": json.dumps(record.prefix)},
    )
    fits = {row[0]: row[2] for row in rows}  # src -> fit
    weighted_fits = [(w, fits.get(src, 0.0)) for src, w in zip(record.prefix, weights, strict=True)]
    return rule.prediction_error(record.reward, tries, reward_sum, weighted_fits)


def _update_edge(
    conn: sqlite3.Connection,
    src: str,
    dst: str,
    weight: float,
    record: StepRecord,
    error: float,
    rule: UpdateRule,
    scope: str,
) -> None:
    # a transition the scope takes first starts from the seed's prior (0 for an unseeded one)
    conn.execute(
        "INSERT OR IGNORE INTO edge_stats (scope, src, dst, fit) VALUES (:scope, :src, :dst, "
        "coalesce((SELECT prior_utility FROM edges WHERE src = :src AND dst = :dst), 0))",
        {"scope": scope, "src": src, "dst": dst},
    )
    fit, weight_sum = conn.execute(
        "SELECT fit, weight_sum FROM edge_stats WHERE scope = ? AND src = ? AND dst = ?",
        (scope, src, dst),
    ).fetchone()
    conn.execute(
        "UPDATE edge_stats SET count = count + 1, weight_sum = weight_sum + :w, "
        f"reward_wsum = reward_wsum + :w * :reward, fit = :fit, {_COUNT_STATUS} "
        "WHERE scope = :scope AND src = :src AND dst = :dst",
        {
            "w": weight,
            "reward": record.reward,
            "fit": rule.fitted(fit, weight_sum, weight, error),
            "status": str(record.status),
            "src": src,
            "dst": dst,
            "scope": scope,
        },
    )


def _add_evidence(
    conn: sqlite3.Connection,
    record: StepRecord,
    local_id: str,
    status: str,
    now: float,
    keep: int,
    scope: str,
) -> None:
    polarity = "positive" if record.success else "negative"
    conn.execute(
        "INSERT OR IGNORE INTO evidence (run_id, task_id, step, local_id, polarity, "
        "task_signature, status, speedup_before, speedup_after, reward, error_excerpt, lesson, "
        "recorded_at, context, scope) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            record.run_id,
            record.task_id,
            record.step,
            local_id,
            polarity,
            record.task_signature,
            status,
            record.speedup_before,
            record.speedup_after,
            record.reward,
            _clip(record.error_excerpt, EXCERPT_LIMIT),
            _clip(record.lesson, LESSON_LIMIT),
            now,
            json.dumps(record.context, sort_keys=True),
            scope,
        ),
    )
    prune_evidence(conn, local_id, polarity, keep, scope)


def prune_evidence(
    conn: sqlite3.Connection, local_id: str, polarity: str, keep: int, scope: str
) -> None:
    """Keep only the ``keep`` best records of one scope's local strategy and polarity."""
    where = "scope = :scope AND local_id = :local AND polarity = :pol"
    conn.execute(
        f"DELETE FROM evidence WHERE {where} AND rowid NOT IN (SELECT rowid FROM evidence "
        f"WHERE {where} ORDER BY {_RANK[polarity]} LIMIT :keep)",
        {"scope": scope, "local": local_id, "pol": polarity, "keep": keep},
    )
