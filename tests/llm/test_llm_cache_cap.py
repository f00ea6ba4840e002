"""The LLM response cache stays under its cap, evicting the least recently used entries."""

from __future__ import annotations

import os

from htam.llm.cache import CHECK_EVERY, ResponseCache, request_hash


def _fill(cache: ResponseCache, n: int) -> list[str]:
    keys = []
    for i in range(n):
        key = request_hash({"i": i})
        cache.put(key, {"i": i}, {"content": "x" * 1000})
        os.utime(cache.path(key), (1000 + i, 1000 + i))  # written in order, one second apart
        keys.append(key)
    return keys


def test_trim_evicts_least_recently_used_down_to_90_percent(tmp_path):
    cache = ResponseCache(tmp_path)
    keys = _fill(cache, 20)
    size = cache.path(keys[0]).stat().st_size
    cache.max_bytes = 10 * size
    assert cache.get(keys[0]) is not None  # a hit: now the most recently used
    evicted = cache.trim()
    kept = [k for k in keys if cache.path(k).exists()]
    assert evicted == 20 - len(kept) and len(kept) in (8, 9)  # ~90% of the cap stays
    assert kept == [keys[0], *keys[-(len(kept) - 1) :]]  # the hit, then the newest
    assert sum(cache.path(k).stat().st_size for k in kept) <= 0.9 * cache.max_bytes
    assert cache.trim() == 0  # under the cap: nothing more goes


def test_writes_check_the_cap_themselves(tmp_path):
    cache = ResponseCache(tmp_path, max_bytes=5_000)
    _fill(cache, CHECK_EVERY + 2)
    total = sum(p.stat().st_size for p in tmp_path.glob("*/*.json"))
    assert total <= 5_000 + 2 * 1200  # trimmed at the last check, two writes since


def test_uncapped_cache_keeps_everything(tmp_path):
    cache = ResponseCache(tmp_path)
    _fill(cache, 5)
    assert cache.trim() == 0 and len(list(tmp_path.glob("*/*.json"))) == 5
