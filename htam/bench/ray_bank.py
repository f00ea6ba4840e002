"""The memory banks of a Ray bench: one writer for the whole cluster.

SQLite's locking does not hold over a network filesystem, so on Ray no worker opens a shared
bank file. One ``BankOwner`` actor, pinned to the driver's node, owns every shared bank of the
bench (``OUT/memory/*.db`` on the driver's disk, WAL mode) and applies the updates it is sent one
call at a time, in the order it receives them (an actor runs one call at a time).

A unit reads a consistent snapshot: when it (re)starts, its worker gets a copy of the bank as it
is at that moment (``snapshot``: SQLite's backup API, serialized) and opens it as a
``SharedBank`` in node-local scratch space. The unit's decisions read that copy plus its own
updates; each update is applied to the copy and sent to the owner (``record_step`` with the same
record, prefix weights and constants; new flat experiences as rows), synchronously, before the
step is persisted. The ledger's key (run, task, step) makes every update idempotent at the
owner, so a unit replayed after a lost worker counts each step once.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from htam.memory import MemoryBank

FLAT_COLUMNS = "scope, run_id, task_id, step, text, record, added_at"  # scope: htam.memory.scopes


class BankOwner:
    """The single writer of a Ray bench's shared banks (run as a Ray actor, ``num_cpus=0``)."""

    def __init__(self, paths: list[str]):
        self.banks = {str(p): MemoryBank.open(p) for p in paths}

    def node(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()

    def snapshot(self, path: str) -> bytes:
        """The whole bank as it is now, as an SQLite image (``sqlite3.Connection.serialize``)."""
        copy = sqlite3.connect(":memory:")
        try:
            self.banks[path].connection.backup(copy)
            image = bytearray(copy.serialize())
        finally:
            copy.close()
        # The header still says WAL (bytes 18-19 = 2), which an image cannot be opened in:
        # mark it a rollback-journal file (1); the receiver reopens its copy in WAL mode.
        image[18:20] = b"\x01\x01"
        return bytes(image)

    def record_step(self, path: str, record, weights, config) -> bool:
        return self.banks[path].record_step(record, weights=weights, config=config)

    def add_flat(self, path: str, rows: list[tuple]) -> int:
        with self.banks[path].transaction() as conn:
            return sum(
                conn.execute(
                    f"INSERT OR IGNORE INTO flat_experiences ({FLAT_COLUMNS}) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    row,
                ).rowcount
                for row in rows
            )

    def step_count(self, path: str) -> int:
        return self.banks[path].step_count()

    def close(self) -> None:
        for bank in self.banks.values():
            bank.close()
        self.banks = {}


class SharedBank(MemoryBank):
    """A unit's snapshot of a shared bank whose updates also go to the ``BankOwner``."""

    owner: Any = None
    shared_path: str = ""
    _flat_mark: int = 0

    @classmethod
    def from_owner(cls, owner, shared_path: str, scratch: Path) -> SharedBank:
        import ray

        image = ray.get(owner.snapshot.remote(shared_path))
        scratch.mkdir(parents=True, exist_ok=True)
        local = scratch / Path(shared_path).name
        for suffix in ("", "-wal", "-shm"):
            Path(f"{local}{suffix}").unlink(missing_ok=True)
        image_conn, target = sqlite3.connect(":memory:"), sqlite3.connect(local)
        try:
            image_conn.deserialize(image)
            image_conn.backup(target)  # written out to the node-local file
        finally:
            image_conn.close()
            target.close()
        bank = cls.open(local)
        bank.owner, bank.shared_path = owner, shared_path
        bank._flat_mark = bank._max_flat_rowid()
        return bank

    def _max_flat_rowid(self) -> int:
        return self.connection.execute(
            "SELECT coalesce(max(rowid), 0) FROM flat_experiences"
        ).fetchone()[0]

    def record_step(self, record, *, weights=None, config=None) -> bool:
        import ray

        new = super().record_step(record, weights=weights, config=config)
        # Always sent (idempotent at the owner): a replayed step the copy already holds may be
        # one whose first send was lost with its worker.
        ray.get(self.owner.record_step.remote(self.shared_path, record, weights, config))
        return new

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write to the copy; flat experiences it added are then sent to the owner (the flat
        memory writes its table through this transaction, not through ``record_step``)."""
        import ray

        with super().transaction() as conn:
            yield conn
        rows = self.connection.execute(
            f"SELECT rowid, {FLAT_COLUMNS} FROM flat_experiences WHERE rowid > ? ORDER BY rowid",
            (self._flat_mark,),
        ).fetchall()
        if rows:
            ray.get(self.owner.add_flat.remote(self.shared_path, [r[1:] for r in rows]))
            self._flat_mark = rows[-1][0]
