"""The memory bank: one SQLite file holding the graph, the step ledger and the evidence.

The bank keeps no configuration: what to learn from a step comes from the policy's update rule
(``htam.memory.updates.UpdateRule``, e.g. ``htam.policy.PolicyConfig``) on every recording.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

from htam.memory import codec, schema, scopes, updates
from htam.memory.model import Edge, EdgeView, Evidence, GlobalNode, LocalNode, StepRecord
from htam.memory.schema import MemoryBankError
from htam.memory.seed import load_seed
from htam.memory.updates import UpdateRule
from htam.vocab import Direction


class MemoryBank:
    """A Hierarchical Transition Graph memory persisted in one SQLite file.

    Several processes may open the same file and record steps at once: every write is one
    ``BEGIN IMMEDIATE`` transaction and the file runs in WAL mode.

    What runs learned is kept per scope (htam.memory.scopes): ``scope`` is the one read (a
    run sets it to its target); a step is learned into the scope of the target its record says
    it was measured on, else into ``scope``. Without one given, the scope holding the most
    steps is read.
    """

    def __init__(self, conn: sqlite3.Connection, path: Path | None, scope: str | None = None):
        self._conn = conn
        self.path = path
        self.scope: str = scope or scopes.home_scope(conn)
        # Nodes never change after creation (import and merge build new banks), so their ids
        # and parents are cached for validation and for the policy's hot path.
        rows = conn.execute("SELECT id FROM global_nodes ORDER BY ord").fetchall()
        self.direction_ids: list[str] = [row[0] for row in rows]
        rows = conn.execute("SELECT id, direction FROM local_nodes ORDER BY ord").fetchall()
        self.parent_of: dict[str, str] = dict(rows)

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path, create: bool = False, scope: str | None = None) -> Self:
        """Open the bank at ``path``; with ``create`` a missing file is built from the seed.
        ``scope``: the scope read (default: the one holding the most steps)."""
        path = Path(path)
        if not path.exists():
            if not create:
                raise MemoryBankError(
                    f"{path}: no memory bank here (`htam memory init {path}` creates one)"
                )
            _build_file(path, load_seed())
        version = schema.validate_file(path)
        conn = schema.connect(str(path), wal=True)
        if version < schema.SCHEMA_VERSION:
            with _transaction(conn):
                schema.migrate(conn)
        return cls(conn, path, scope)

    @classmethod
    def create(cls, path: str | Path, data: dict[str, Any] | None = None) -> Self:
        """Build a new bank at ``path`` from ``data`` (a seed or an export); never overwrites."""
        path = Path(path)
        if path.exists():
            raise MemoryBankError(f"{path}: already exists; refusing to overwrite it")
        _build_file(path, data if data is not None else load_seed())
        return cls.open(path)

    @classmethod
    def in_memory(cls, data: dict[str, Any] | None = None) -> MemoryBank:
        """A private bank in RAM (tests, simulations), built from the seed unless given data."""
        conn = schema.connect(":memory:", wal=False)
        with _transaction(conn):
            schema.create_schema(conn)
            _load(conn, data if data is not None else load_seed())
        return cls(conn, None)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> MemoryBank:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading ---------------------------------------------------------------------------

    def _query(self, sql: str, **params: object) -> sqlite3.Cursor:
        return self._conn.execute(sql, {"scope": self.scope, **params})

    def directions(self) -> list[GlobalNode]:
        rows = self._query(f"{codec.GLOBAL_SELECT} ORDER BY n.ord")
        return [codec.global_from_row(row) for row in rows]

    def direction(self, direction_id: str) -> GlobalNode:
        row = self._query(f"{codec.GLOBAL_SELECT} WHERE n.id = :id", id=direction_id).fetchone()
        if row is None:
            raise KeyError(f"unknown direction {direction_id!r}")
        return codec.global_from_row(row)

    def locals_of(self, direction_id: str) -> list[LocalNode]:
        if direction_id not in self.direction_ids:
            raise KeyError(f"unknown direction {direction_id!r}")
        rows = self._query(
            f"{codec.LOCAL_SELECT} WHERE n.direction = :d ORDER BY n.ord", d=direction_id
        )
        return [codec.local_from_row(row) for row in rows]

    def all_locals(self) -> list[LocalNode]:
        rows = self._query(f"{codec.LOCAL_SELECT} ORDER BY n.ord")
        return [codec.local_from_row(row) for row in rows]

    def local(self, local_id: str) -> LocalNode:
        row = self._query(f"{codec.LOCAL_SELECT} WHERE n.id = :id", id=local_id).fetchone()
        if row is None:
            raise KeyError(f"unknown local strategy {local_id!r}")
        return codec.local_from_row(row)

    def edge(self, src: str, dst: str) -> Edge | None:
        where = "{t}.src = :src AND {t}.dst = :dst"
        row = self._query(codec.edge_select(where), src=src, dst=dst).fetchone()
        return codec.edge_from_row(row) if row else None

    def edges(self, sources: list[str] | None = None) -> list[Edge]:
        """All edges, or those leaving ``sources``."""
        if sources is None:
            rows = self._query(f"{codec.edge_select()} ORDER BY 1, 2")
        else:
            rows = self._query(
                f"{codec.edge_select(codec.SOURCES_IN)} ORDER BY 1, 2",
                srcs=json.dumps(list(sources)),
            )
        return [codec.edge_from_row(row) for row in rows]

    def direction_stats(self) -> dict[str, tuple[int, float]]:
        """(tries, reward_sum) of every direction: the policy's hot path, one query."""
        rows = self._query(
            "SELECT n.id, coalesce(s.tries, 0), coalesce(s.reward_sum, 0) FROM global_nodes n "
            "LEFT JOIN node_stats s ON s.node = n.id AND s.scope = :scope"
        )
        return {row[0]: (row[1], row[2]) for row in rows}

    def edge_views(self, sources: list[str]) -> dict[tuple[str, str], EdgeView]:
        """The numbers of every edge leaving ``sources`` (the policy's hot path, one query)."""
        if not sources:
            return {}
        rows = self._query(
            codec.edge_select(codec.SOURCES_IN, view=True), srcs=json.dumps(list(sources))
        )
        return {(row[0], row[1]): EdgeView(*row[2:]) for row in rows}

    def evidence(self, local_id: str) -> list[Evidence]:
        """The scope's evidence of one strategy: a record of another scope is not offered."""
        rows = self._query(
            f"SELECT {codec.EVIDENCE_COLUMNS} FROM evidence WHERE scope = :scope "
            "AND local_id = :id ORDER BY polarity DESC, reward DESC, recorded_at DESC",
            id=local_id,
        )
        return [codec.evidence_from_row(row) for row in rows]

    def step_count(self, scope: str | None = None) -> int:
        """Steps recorded in every scope, or in ``scope``."""
        if scope is None:
            return self._conn.execute("SELECT count(*) FROM steps").fetchone()[0]
        return self._conn.execute(
            "SELECT count(*) FROM steps WHERE scope = ?", (scope,)
        ).fetchone()[0]

    def scopes(self) -> dict[str, tuple[int, int, int]]:
        """(steps, node tries, evidence records) of every scope that holds something."""
        return scopes.scope_counts(self._conn)

    def merge_scope(self, source: str, into: str, *, config: UpdateRule | None) -> dict[str, int]:
        """Add scope ``source``'s learning to scope ``into`` (htam.memory.scopes.merge_scope);
        ``config`` (the policy's update rule) bounds the evidence kept."""
        rule = _required(config)
        with self.transaction() as conn:
            return scopes.merge_scope(conn, source, into, rule.evidence_keep)

    def has_step(self, run_id: str, task_id: str, step: int) -> bool:
        row = self._conn.execute(
            "SELECT 1 FROM steps WHERE run_id = ? AND task_id = ? AND step = ?",
            (run_id, task_id, step),
        ).fetchone()
        return row is not None

    # -- learning --------------------------------------------------------------------------

    def record_step(
        self,
        record: StepRecord,
        *,
        config: UpdateRule | None,
        weights: list[float] | None = None,
    ) -> bool:
        """Learn from one step; False when (run_id, task_id, step) was already recorded.

        ``config`` is the policy's update rule (a ``PolicyConfig``; required, None is refused:
        the bank has no rule of its own). ``weights`` align with ``record.prefix`` (most recent
        last); without them the prefix keeps its last K elements and gets the rule's weights.
        """
        rule = _required(config)
        record, weights = self._prepare(record, weights, rule)
        with self.transaction() as conn:
            return updates.apply_step(conn, record, weights, rule, time.time(), self.scope)

    def record_steps(self, records: list[StepRecord], *, config: UpdateRule | None) -> int:
        """Record many steps in one transaction (bulk loads); return how many were new."""
        rule = _required(config)
        prepared = [self._prepare(record, None, rule) for record in records]
        now = time.time()
        with self.transaction() as conn:
            return sum(updates.apply_step(conn, r, w, rule, now, self.scope) for r, w in prepared)

    def _prepare(
        self, record: StepRecord, weights: list[float] | None, rule: UpdateRule
    ) -> tuple[StepRecord, list[float]]:
        prefix = list(record.prefix) if weights is not None else list(record.prefix)[-rule.K :]
        direction = record.direction
        if direction == Direction.ANY and record.local_id is not None:
            direction = self.parent_of.get(record.local_id, direction)
        unknown = [d for d in [*prefix, direction] if d not in self.direction_ids]
        if unknown:
            raise ValueError(f"step {record.key}: unknown direction(s) {unknown}")
        if record.local_id is not None and self.parent_of.get(record.local_id) != direction:
            raise ValueError(
                f"step {record.key}: local {record.local_id!r} is not a strategy of {direction!r}"
            )
        if weights is None:
            weights = rule.prefix_weights(len(prefix))
        elif len(weights) != len(prefix) or any(w < 0 for w in weights):
            raise ValueError(f"step {record.key}: need {len(prefix)} non-negative weights")
        fixed = StepRecord(**{**record.__dict__, "prefix": prefix, "direction": direction})
        return fixed, list(weights)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction holding the file's write lock from the start."""
        with _transaction(self._conn):
            yield self._conn

    def export_json(self) -> dict[str, Any]:
        from htam.memory.transfer import export_bank

        return export_bank(self._conn)

    @classmethod
    def import_json(cls, data: dict[str, Any], path: str | Path) -> MemoryBank:
        """Create a new bank at ``path`` from an export (never overwrites an existing file)."""
        from htam.memory.transfer import check_export

        check_export(data)
        return cls.create(path, data)

    @property
    def connection(self) -> sqlite3.Connection:
        """The raw connection, for the flat retriever and inspection tools."""
        return self._conn


def _required(config: UpdateRule | None) -> UpdateRule:
    if config is None:
        raise TypeError(
            "recording a step needs the policy's update rule: config=htam.policy.PolicyConfig()"
        )
    return config


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _build_file(path: Path, data: dict[str, Any]) -> None:
    """Build a complete bank in a temporary file, then link it into place atomically.

    ``os.link`` fails if ``path`` appeared meanwhile (another process won the race), so a
    half-built or foreign file is never visible under ``path`` and nothing is overwritten.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    # mkstemp's file is the owner's alone (0600), and SQLite gives the bank's -wal and -shm its
    # mode: a bank under a folder that candidates can see is neither readable nor lockable by
    # them. An empty file is an empty database to SQLite.
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".building", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        conn = schema.connect(str(tmp), wal=True)
        try:
            with _transaction(conn):
                schema.create_schema(conn)
                _load(conn, data)
        finally:
            conn.close()
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # someone else created it first; theirs is validated by the caller
    finally:
        for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
            leftover.unlink(missing_ok=True)


def _load(conn: sqlite3.Connection, data: dict[str, Any]) -> None:
    """Insert a seed or an export into a fresh schema (inside the caller's transaction)."""
    from htam.memory.transfer import load_into

    load_into(conn, data)
    conn.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES ('created_at', ?), ('source', ?)",
        (json.dumps(time.time()), data.get("format", "")),
    )
