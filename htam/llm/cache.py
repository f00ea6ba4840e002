"""On-disk cache of chat responses keyed by a hash of the whole request.

The request that is hashed is exactly what would be sent (endpoint, model, messages, sampling
parameters) plus an optional caller salt, and never the API key. Entries are written atomically
(temporary file + rename), so concurrent writers and crashes cannot leave a torn entry.
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


def request_hash(request: dict[str, Any]) -> str:
    canonical = json.dumps(
        {"v": CACHE_VERSION, **request}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


class ResponseCache:
    def __init__(self, root: Path):
        self.root = Path(root)

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
        return path
