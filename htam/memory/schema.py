"""The SQLite layout of a memory bank, its migrations, and opening a file safely.

A bank is recognised by ``PRAGMA application_id`` and versioned by ``PRAGMA user_version``.
A file is validated read-only before anything writes to it, so a file that is not a bank, is
corrupt, or comes from a newer HTAM raises :class:`MemoryBankError` and is left untouched.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from htam.memory.scopes import to_scopes

APPLICATION_ID = 0x4854414D  # "HTAM"
SQLITE_MAGIC = b"SQLite format 3\x00"
BUSY_TIMEOUT_MS = 60_000  # bench workers queue for the write lock rather than fail

# Version 1: the graph, the step ledger and the bounded evidence.
SCHEMA_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE global_nodes (
    id TEXT PRIMARY KEY, ord INTEGER NOT NULL, title TEXT NOT NULL, intent TEXT NOT NULL,
    objectives TEXT NOT NULL, triggers TEXT NOT NULL, risks TEXT NOT NULL,
    tries INTEGER NOT NULL DEFAULT 0, successes INTEGER NOT NULL DEFAULT 0,
    reward_sum REAL NOT NULL DEFAULT 0, ema REAL NOT NULL DEFAULT 0,
    status_counts TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE local_nodes (
    id TEXT PRIMARY KEY, ord INTEGER NOT NULL,
    direction TEXT NOT NULL REFERENCES global_nodes(id),
    title TEXT NOT NULL, description TEXT NOT NULL, pattern TEXT NOT NULL, checks TEXT NOT NULL,
    op_families TEXT NOT NULL, triggers TEXT NOT NULL, risks TEXT NOT NULL,
    tries INTEGER NOT NULL DEFAULT 0, successes INTEGER NOT NULL DEFAULT 0,
    reward_sum REAL NOT NULL DEFAULT 0, ema REAL NOT NULL DEFAULT 0,
    status_counts TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX local_by_direction ON local_nodes(direction, ord);
CREATE TABLE edges (
    src TEXT NOT NULL REFERENCES global_nodes(id), dst TEXT NOT NULL REFERENCES global_nodes(id),
    applies_when TEXT NOT NULL DEFAULT '', rationale TEXT NOT NULL DEFAULT '',
    risks TEXT NOT NULL DEFAULT '[]', prior_utility REAL NOT NULL DEFAULT 0,
    count INTEGER NOT NULL DEFAULT 0, weight_sum REAL NOT NULL DEFAULT 0,
    reward_wsum REAL NOT NULL DEFAULT 0, fit REAL NOT NULL DEFAULT 0,
    status_counts TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (src, dst)
) WITHOUT ROWID;
CREATE TABLE steps (
    run_id TEXT NOT NULL, task_id TEXT NOT NULL, step INTEGER NOT NULL,
    task_signature TEXT NOT NULL, direction TEXT NOT NULL, local_id TEXT, status TEXT NOT NULL,
    reward REAL NOT NULL, prefix TEXT NOT NULL, weights TEXT NOT NULL,
    speedup_before REAL, speedup_after REAL, recorded_at REAL NOT NULL,
    PRIMARY KEY (run_id, task_id, step)
) WITHOUT ROWID;
CREATE TABLE evidence (
    run_id TEXT NOT NULL, task_id TEXT NOT NULL, step INTEGER NOT NULL,
    local_id TEXT NOT NULL REFERENCES local_nodes(id), polarity TEXT NOT NULL,
    task_signature TEXT NOT NULL, status TEXT NOT NULL,
    speedup_before REAL, speedup_after REAL, reward REAL NOT NULL,
    error_excerpt TEXT NOT NULL, lesson TEXT NOT NULL, recorded_at REAL NOT NULL,
    PRIMARY KEY (run_id, task_id, step)
);
CREATE INDEX evidence_by_local ON evidence(local_id, polarity);
"""

# MIGRATIONS[v] upgrades a bank from version v - 1 to v. New banks are built by SCHEMA_V1 and
# then every migration, so the upgrade path is the path every bank takes.
MIGRATIONS: dict[int, str | Callable[[sqlite3.Connection], None]] = {
    # Version 2: the flat-memory baseline keeps its experiences in the same file.
    2: """
    CREATE TABLE flat_experiences (
        run_id TEXT NOT NULL, task_id TEXT NOT NULL, step INTEGER NOT NULL,
        text TEXT NOT NULL, record TEXT NOT NULL, added_at REAL NOT NULL,
        PRIMARY KEY (run_id, task_id, step)
    );
    """,
    # Version 3: a strategy's pattern per language, and an edge's checkable applicability.
    3: """
    ALTER TABLE local_nodes ADD COLUMN patterns TEXT NOT NULL DEFAULT '{}';
    ALTER TABLE edges ADD COLUMN condition TEXT NOT NULL DEFAULT '{}';
    """,
    # Version 4: the candidates learned from, by digest (task, code, target, language, size):
    # a rerun served the same evaluations from the cache is not learned from twice; and what a
    # step and its evidence were measured on (target, language, device, size timed).
    4: """
    CREATE TABLE learned_candidates (
        digest TEXT NOT NULL, store TEXT NOT NULL,
        run_id TEXT NOT NULL, task_id TEXT NOT NULL, step INTEGER NOT NULL,
        PRIMARY KEY (digest, store)
    ) WITHOUT ROWID;
    ALTER TABLE steps ADD COLUMN context TEXT NOT NULL DEFAULT '{}';
    ALTER TABLE evidence ADD COLUMN context TEXT NOT NULL DEFAULT '{}';
    """,
    # Version 5: what runs learned is kept per scope (the target measured on): statistics move
    # to node_stats and edge_stats, evidence, ledger and flat experiences get a scope column.
    5: to_scopes,
}
SCHEMA_VERSION = max(MIGRATIONS)


class MemoryBankError(Exception):
    """A memory bank that cannot be opened or written, with the file and the reason."""


def _check_header(path: Path) -> None:
    with path.open("rb") as handle:
        head = handle.read(len(SQLITE_MAGIC))
    if head != SQLITE_MAGIC:
        kind = "an empty file" if not head else "not an SQLite file"
        raise MemoryBankError(f"{path}: not a memory bank ({kind}); refusing to touch it")


def validate_file(path: Path) -> int:
    """Check read-only that ``path`` is an HTAM bank this code can open; return its version."""
    _check_header(path)
    uri = f"{path.resolve().as_uri()}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
    except sqlite3.DatabaseError as exc:
        raise MemoryBankError(f"{path}: cannot open: {exc}") from exc
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        if app_id != APPLICATION_ID:
            raise MemoryBankError(
                f"{path}: an SQLite file but not an HTAM memory bank "
                f"(application_id {app_id:#x}); refusing to touch it"
            )
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise MemoryBankError(
                f"{path}: written by a newer HTAM (schema {version} > {SCHEMA_VERSION}); "
                "upgrade htam to open it"
            )
        verdict = conn.execute("PRAGMA quick_check").fetchone()[0]
        if verdict != "ok":
            raise MemoryBankError(f"{path}: corrupt memory bank: {verdict}")
    except sqlite3.DatabaseError as exc:
        raise MemoryBankError(f"{path}: corrupt memory bank: {exc}") from exc
    finally:
        conn.close()
    return version


def connect(target: str, *, wal: bool) -> sqlite3.Connection:
    """A connection in autocommit mode; transactions are explicit (BEGIN IMMEDIATE)."""
    conn = sqlite3.connect(target, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys = ON")
    if wal:
        conn.execute("PRAGMA journal_mode = WAL")
        # NORMAL in WAL mode survives a killed process (the OS keeps the written pages); only a
        # power cut can lose the last commits, never corrupt the file.
        conn.execute("PRAGMA synchronous = NORMAL")
    return conn


def create_schema(conn: sqlite3.Connection) -> None:
    """Lay out a fresh bank (inside the caller's transaction)."""
    for statement in _statements(SCHEMA_V1):
        conn.execute(statement)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("PRAGMA user_version = 1")
    migrate(conn)


def migrate(conn: sqlite3.Connection) -> int:
    """Apply the missing migrations (inside the caller's transaction); return the new version."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    for target in sorted(v for v in MIGRATIONS if v > version):
        step = MIGRATIONS[target]
        if callable(step):
            step(conn)
        else:
            for statement in _statements(step):
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {target}")
        version = target
    return version


def _statements(script: str) -> list[str]:
    return [part.strip() for part in script.split(";") if part.strip()]
