"""The flat-memory baseline: top-k similar past experiences by BM25, no hierarchy, no transitions.

Experiences live in the bank file's ``flat_experiences`` table, so the flat method shares the
bank's concurrency and transfer machinery, and its scopes (htam.memory.scopes): an experience
is stored in the scope of the target it was measured on and retrieved only in that scope; the
curated strategies (seed records) are shared. Ranking is ``rank_bm25.BM25Okapi``.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rank_bm25 import BM25Okapi

from htam.memory.model import StepRecord
from htam.memory.scopes import SHARED
from htam.memory.updates import claim, scope_of
from htam.status import Status

SEED_RUN = "seed"  # the run id of the curated strategies stored as flat records

if TYPE_CHECKING:
    from htam.memory.store import MemoryBank

_TOKEN = re.compile(r"[a-z0-9]+")
_VISIBLE = f"scope IN ('{SHARED}', ?)"  # the seed records and the bank's scope


def tokenize(text: str) -> list[str]:
    """Lower-cased alphanumeric words; identifiers split at underscores and punctuation."""
    return _TOKEN.findall(text.lower())


@dataclass
class FlatHit:
    text: str
    record: StepRecord
    score: float


class FlatMemory:
    """Past experiences as a flat list, retrieved by BM25 similarity to a query."""

    def __init__(self, bank: MemoryBank):
        self._conn = bank.connection
        self._bank = bank
        self._index: BM25Okapi | None = None
        self._docs: list[tuple[str, str]] = []  # (text, record json) aligned with the index
        self._words: list[set[str]] = []
        self._version: tuple[str, int, float] | None = None

    def add(self, experience_text: str, record: StepRecord, scope: str | None = None) -> bool:
        """Store one experience (in ``scope``, else that of the target it was measured on);
        False if its (run, task, step) is already stored there, or if its candidate was learned
        from under another key."""
        if scope is None:
            scope = scope_of(record, self._bank.scope)
        with self._bank.transaction() as conn:
            if not claim(conn, record, "flat"):
                return False  # its candidate was learned from already (a cached rerun)
            cursor = conn.execute(
                "INSERT OR IGNORE INTO flat_experiences "
                "(scope, run_id, task_id, step, text, record, added_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    scope,
                    record.run_id,
                    record.task_id,
                    record.step,
                    experience_text,
                    json.dumps(record.to_dict()),
                    time.time(),
                ),
            )
        return cursor.rowcount == 1

    def seed_from(self, bank: MemoryBank, language: str | None = None) -> int:
        """Store the bank's curated strategies as flat records (run id ``seed``), once: the flat
        baseline starts with the knowledge htam's graph starts with. Returns how many were new."""
        added = 0
        for node in bank.all_locals():
            text = (
                f"Strategy {node.id}: {node.title}. {node.description} "
                f"Suits: {', '.join(node.op_families)}. Pattern: {node.pattern_for(language)} "
                f"Checks: {'; '.join(node.checks)}"
            )
            record = StepRecord(
                run_id=SEED_RUN, task_id=node.id, task_signature="", step=0, prefix=[],
                direction=node.direction, local_id=node.id, status=Status.OK,
                speedup_before=None, speedup_after=None, reward=0.0,
                lesson=f"{node.id}: seed knowledge, not a measured step",
            )  # fmt: skip
            added += self.add(text, record, SHARED)
        return added

    def __len__(self) -> int:
        return self._conn.execute(
            f"SELECT count(*) FROM flat_experiences WHERE {_VISIBLE}", (self._bank.scope,)
        ).fetchone()[0]

    def retrieve(self, query: str, k: int) -> list[FlatHit]:
        """The ``k`` experiences most similar to ``query`` (only those sharing a term with it)."""
        terms = tokenize(query)
        index = self._current_index()
        if index is None or not terms or k <= 0:
            return []
        scores = index.get_scores(terms)
        # BM25Okapi's idf turns negative for terms in most documents of a small corpus, so
        # relevance is "shares a query term", and the BM25 score only orders the relevant.
        wanted = set(terms)
        relevant = [i for i, words in enumerate(self._words) if wanted & words]
        order = sorted(relevant, key=lambda i: (-scores[i], i))[:k]
        return [
            FlatHit(
                self._docs[i][0],
                StepRecord.from_dict(json.loads(self._docs[i][1])),
                float(scores[i]),
            )
            for i in order
        ]

    def _current_index(self) -> BM25Okapi | None:
        # Other processes may add experiences: rebuild when the table changed.
        scope = self._bank.scope
        count, latest = self._conn.execute(
            f"SELECT count(*), coalesce(max(added_at), 0) FROM flat_experiences WHERE {_VISIBLE}",
            (scope,),
        ).fetchone()
        version = (scope, count, latest)
        if version != self._version:
            rows = self._conn.execute(
                f"SELECT text, record FROM flat_experiences WHERE {_VISIBLE} "
                "ORDER BY run_id, task_id, step, scope",
                (scope,),
            ).fetchall()
            # A text without words can never match; BM25 also divides by the mean length.
            rows = [(text, record) for text, record in rows if tokenize(text)]
            self._docs = rows
            corpus = [tokenize(text) for text, _ in rows]
            self._words = [set(words) for words in corpus]
            self._index = BM25Okapi(corpus) if corpus else None
            self._version = version
        return self._index
