"""Learning from one step: statistics, bounded evidence and position-weighted edge updates.

Edges learn by least mean squares on the score's own model of the reward: the prefix part of
the score predicts ``V(g) + sum_k w_k * fit(p_k -> g)``, and every prefix edge moves by
``w_k * error * step``, ``step = max(edge_lr, 1 / (W + shrink))`` where W is the edge's total
weight. So a lone edge starts as a shrunk running mean and later tracks a moving policy, and an
older prefix element only gets the credit the more recent ones do not already explain. (A plain
w_k-weighted mean of rewards per edge would credit a -> c with the reward of a good b -> c in
the path a, b, c, and the policy would keep trying a bad a -> c.)

Everything here runs inside the caller's write transaction, so a step is recorded entirely or
not at all, and the ``steps`` ledger's primary key makes recording idempotent per
(run, task, step).
"""

from __future__ import annotations

import json
import sqlite3

from htam.memory.model import StepRecord
from htam.policy.config import PolicyConfig
from htam.policy.scoring import shrunk_value
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


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def apply_step(
    conn: sqlite3.Connection,
    record: StepRecord,
    weights: list[float],
    config: PolicyConfig,
    now: float,
) -> bool:
    """Record ``record``; False (and no change) when its key is already in the ledger."""
    status = str(Status(record.status))
    cursor = conn.execute(
        "INSERT OR IGNORE INTO steps (run_id, task_id, step, task_signature, direction, "
        "local_id, status, reward, prefix, weights, speedup_before, speedup_after, recorded_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
        ),
    )
    if cursor.rowcount == 0:
        return False
    error = _prediction_error(conn, record, weights, config)  # before the statistics move
    params = {
        "success": int(record.success),
        "reward": record.reward,
        "alpha": config.ema_alpha,
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
        _add_evidence(conn, record, status, now, config.evidence_keep)
    for src, weight in zip(record.prefix, weights, strict=True):
        if weight > 0:
            _update_edge(conn, src, record.direction, weight, record, error, config)
    return True


def _prediction_error(
    conn: sqlite3.Connection, record: StepRecord, weights: list[float], config: PolicyConfig
) -> float:
    """The reward minus what the direction's value and the prefix edges predicted."""
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
    predicted = shrunk_value(tries, reward_sum, config.value_shrink) + sum(
        w * fits.get(src, 0.0) for src, w in zip(record.prefix, weights, strict=True)
    )
    return record.reward - predicted


def _update_edge(
    conn: sqlite3.Connection,
    src: str,
    dst: str,
    weight: float,
    record: StepRecord,
    error: float,
    config: PolicyConfig,
) -> None:
    conn.execute("INSERT OR IGNORE INTO edges (src, dst) VALUES (?, ?)", (src, dst))
    conn.execute(
        "UPDATE edges SET count = count + 1, weight_sum = weight_sum + :w, "
        "reward_wsum = reward_wsum + :w * :reward, "
        # the right-hand sides read the old row: weight_sum + :w is the new total weight
        "fit = fit + :w * :error * max(:lr, 1.0 / (weight_sum + :w + :shrink)), "
        f"{_COUNT_STATUS} WHERE src = :src AND dst = :dst",
        {
            "w": weight,
            "reward": record.reward,
            "error": error,
            "lr": config.edge_lr,
            "shrink": config.shrink,
            "status": str(record.status),
            "src": src,
            "dst": dst,
        },
    )


def _add_evidence(
    conn: sqlite3.Connection, record: StepRecord, status: str, now: float, keep: int
) -> None:
    polarity = "positive" if record.success else "negative"
    conn.execute(
        "INSERT OR IGNORE INTO evidence (run_id, task_id, step, local_id, polarity, "
        "task_signature, status, speedup_before, speedup_after, reward, error_excerpt, lesson, "
        "recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            record.run_id,
            record.task_id,
            record.step,
            record.local_id,
            polarity,
            record.task_signature,
            status,
            record.speedup_before,
            record.speedup_after,
            record.reward,
            _clip(record.error_excerpt, EXCERPT_LIMIT),
            _clip(record.lesson, LESSON_LIMIT),
            now,
        ),
    )
    prune_evidence(conn, record.local_id, polarity, keep)


def prune_evidence(conn: sqlite3.Connection, local_id: str, polarity: str, keep: int) -> None:
    """Keep only the ``keep`` best records of one local strategy and polarity."""
    conn.execute(
        "DELETE FROM evidence WHERE local_id = :local AND polarity = :pol AND rowid NOT IN "
        f"(SELECT rowid FROM evidence WHERE local_id = :local AND polarity = :pol "
        f"ORDER BY {_RANK[polarity]} LIMIT :keep)",
        {"local": local_id, "pol": polarity, "keep": keep},
    )
