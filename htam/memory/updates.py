"""Persisting one step: statistics, bounded evidence and position-weighted edge updates.

What to learn is the policy's: an :class:`UpdateRule` (``htam.policy.PolicyConfig`` is one)
gives the prefix weights, the prediction error of the step and each edge's new fit (the LMS rule
of htam.policy.fitting), and the constants of the EMA trend and of the evidence bound. This
module reads the numbers the rule needs from the bank and writes what it returns; it holds no
constant and no formula of the rule.

Everything here runs inside the caller's write transaction, so a step is recorded entirely or
not at all, and the ``steps`` ledger's primary key makes recording idempotent per
(run, task, step).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Protocol

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


def apply_step(
    conn: sqlite3.Connection,
    record: StepRecord,
    weights: list[float],
    rule: UpdateRule,
    now: float,
) -> bool:
    """Record ``record``; False (and no change) when its key is already in the ledger, or when
    its candidate was learned from under another key (a rerun served from the cache)."""
    status = str(Status(record.status))
    if not claim(conn, record, "graph"):
        return False
    cursor = conn.execute(
        "INSERT OR IGNORE INTO steps (run_id, task_id, step, task_signature, direction, "
        "local_id, status, reward, prefix, weights, speedup_before, speedup_after, recorded_at, "
        "context) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
        ),
    )
    if cursor.rowcount == 0:
        return False
    error = _prediction_error(conn, record, weights, rule)  # before the statistics move
    params = {
        "success": int(record.success),
        "reward": record.reward,
        "alpha": rule.ema_alpha,
        "status": status,
    }
    conn.execute(
        f"UPDATE global_nodes SET {_NODE_UPDATE} WHERE id = :id", params | {"id": record.direction}
    )
    if record.local_id is not None:
        conn.execute(
            f"UPDATE local_nodes SET {_NODE_UPDATE} WHERE id = :id",
            params | {"id": record.local_id},
        )
        _add_evidence(conn, record, record.local_id, status, now, rule.evidence_keep)
    for src, weight in zip(record.prefix, weights, strict=True):
        if weight > 0:
            _update_edge(conn, src, record.direction, weight, record, error, rule)
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
    conn: sqlite3.Connection, record: StepRecord, weights: list[float], rule: UpdateRule
) -> float:
    """The rule's prediction error of the step, from the bank's numbers before it."""
    tries, reward_sum = conn.execute(
        "SELECT tries, reward_sum FROM global_nodes WHERE id = ?", (record.direction,)
    ).fetchone()
    marks = ", ".join("?" * len(record.prefix))
    fits = dict(
        conn.execute(
            f"SELECT src, fit FROM edges WHERE dst = ? AND src IN ({marks})",
            [record.direction, *record.prefix],
        ).fetchall()
    )
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
) -> None:
    conn.execute("INSERT OR IGNORE INTO edges (src, dst) VALUES (?, ?)", (src, dst))
    fit, weight_sum = conn.execute(
        "SELECT fit, weight_sum FROM edges WHERE src = ? AND dst = ?", (src, dst)
    ).fetchone()
    conn.execute(
        "UPDATE edges SET count = count + 1, weight_sum = weight_sum + :w, "
        f"reward_wsum = reward_wsum + :w * :reward, fit = :fit, {_COUNT_STATUS} "
        "WHERE src = :src AND dst = :dst",
        {
            "w": weight,
            "reward": record.reward,
            "fit": rule.fitted(fit, weight_sum, weight, error),
            "status": str(record.status),
            "src": src,
            "dst": dst,
        },
    )


def _add_evidence(
    conn: sqlite3.Connection,
    record: StepRecord,
    local_id: str,
    status: str,
    now: float,
    keep: int,
) -> None:
    polarity = "positive" if record.success else "negative"
    conn.execute(
        "INSERT OR IGNORE INTO evidence (run_id, task_id, step, local_id, polarity, "
        "task_signature, status, speedup_before, speedup_after, reward, error_excerpt, lesson, "
        "recorded_at, context) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
        ),
    )
    prune_evidence(conn, local_id, polarity, keep)


def prune_evidence(conn: sqlite3.Connection, local_id: str, polarity: str, keep: int) -> None:
    """Keep only the ``keep`` best records of one local strategy and polarity."""
    conn.execute(
        "DELETE FROM evidence WHERE local_id = :local AND polarity = :pol AND rowid NOT IN "
        f"(SELECT rowid FROM evidence WHERE local_id = :local AND polarity = :pol "
        f"ORDER BY {_RANK[polarity]} LIMIT :keep)",
        {"local": local_id, "pol": polarity, "keep": keep},
    )
