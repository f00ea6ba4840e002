"""On-disk cache of chat responses keyed by a hash of the whole request.

The request that is hashed is exactly what would be sent (endpoint, model, messages, sampling
parameters) plus an optional caller salt, and never the API key. Entries are written atomically
(temporary file + rename), so concurrent writers and crashes cannot leave a torn entry.

The cache is capped: every ``CHECK_EVERY`` writes, when it holds more than ``max_bytes``, the
least recently used entries (a hit refreshes an entry's time) go until it holds 90% of the cap.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

CACHE_VERSION = 1
CHECK_EVERY = 64  # writes between size checks: a check lists the whole cache


def request_hash(request: dict[str, Any]) -> str:
    canonical = json.dumps(
        {"v": CACHE_VERSION, **request}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


class ResponseCache:
    def __init__(self, root: Path, max_bytes: int | None = None):
        self.root = Path(root)
        self.max_bytes = max_bytes  # None: unbounded
        self._writes = 0

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        path = self.path(key)
        try:
            entry = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except json.JSONDecodeError:
            # Only a file written by something else can be torn (writes are atomic): refetch.
            log.warning("ignoring unreadable LLM cache entry %s", path)
            return None
        try:
            os.utime(path)  # recently used: the last to be evicted
        except OSError:  # a read-only cache still serves hits
            pass
        return entry.get("response")

    def put(self, key: str, request: dict[str, Any], response: dict[str, Any]) -> Path:
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        entry = {
            "version": CACHE_VERSION,
            "key": key,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "request": request,
            "response": response,
        }
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:8]}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(entry, f, indent=1, ensure_ascii=False)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self._writes += 1
        if self.max_bytes is not None and self._writes % CHECK_EVERY == 1:
            self.trim()
        return path

    def forget(self, key: str) -> None:
        """Drop an entry: a reply that proved to be the endpoint's fault (no code, no valid
        answer) is asked for again on a rerun, not served from here."""
        self.path(key).unlink(missing_ok=True)

    def trim(self) -> int:
        """Evict least recently used entries while over the cap; returns how many went."""
        if self.max_bytes is None:
            return 0
        entries = []
        for path in self.root.glob("*/*.json"):
            try:
                st = path.stat()
            except FileNotFoundError:  # evicted by another process meanwhile
                continue
            entries.append((st.st_mtime, st.st_size, path))
        total = sum(size for _, size, _ in entries)
        if total <= self.max_bytes:
            return 0
        evicted = 0
        for _, size, path in sorted(entries):
            if total <= 0.9 * self.max_bytes:
                break
            path.unlink(missing_ok=True)
            total -= size
            evicted += 1
        log.info("LLM cache over %d bytes: evicted %d entries", self.max_bytes, evicted)
        return evicted
