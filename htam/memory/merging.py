"""The merge of two exports (``htam memory merge``), scope by scope.

Statistics of one scope add (a scope only ever meets the same scope: merging banks moves no
learning between targets; htam.memory.scopes.merge_scope does that, when asked). Ledgers,
evidence and flat experiences union; a step present in both ledgers (the two banks share
history) is counted once, by subtracting its contribution from its scope's sum. The EMA trend
is the tries-weighted mean of both trends and an edge's fitted advantage the weight-weighted
mean of both fits: neither can be added, and for shared steps neither can be un-added, so these
two are approximations.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from htam.memory import codec
from htam.memory.export_format import EXPORT_FORMAT, EXPORT_VERSION, check_export, upgrade
from htam.memory.model import EdgeStats, NodeStats
from htam.memory.schema import SCHEMA_VERSION
from htam.memory.scopes import add_edge_stats, add_node_stats
from htam.memory.updates import UpdateRule, prune_evidence
from htam.status import Status

Key = tuple[Any, ...]


def _key(item: dict[str, Any]) -> Key:
    return (item["run_id"], item["task_id"], item["step"])


def _scoped_key(item: dict[str, Any]) -> Key:
    return (item["scope"], *_key(item))


def _union(a: list[dict], b: list[dict], stamp: str, key=_key) -> list[dict]:
    """Union by key, sorted by key; of two copies the earlier-recorded one wins, so
    merge(a, b) and merge(b, a) keep the same records."""
    merged: dict[Key, dict] = {}
    for item in [*a, *b]:
        k = key(item)
        kept = merged.get(k)
        if kept is None or (item[stamp], json.dumps(item, sort_keys=True)) < (
            kept[stamp],
            json.dumps(kept, sort_keys=True),
        ):
            merged[k] = item
    return [merged[k] for k in sorted(merged)]


def merge(a: dict[str, Any], b: dict[str, Any], rule: UpdateRule) -> dict[str, Any]:
    """Merge two exports: statistics add per scope (shared steps once), evidence and ledgers
    union. ``rule`` is the policy's update rule (a ``PolicyConfig``): its ``evidence_keep``
    bounds the merged evidence."""
    check_export(a)
    check_export(b)
    a, b = upgrade(a), upgrade(b)
    overlap = sorted(set(map(_key, a["steps"])) & set(map(_key, b["steps"])))
    steps = _union(a["steps"], b["steps"], "recorded_at")
    chosen = {_key(step): step for step in steps}  # the copy that stays is the one subtracted
    nodes = _merge_nodes(a["scopes"], b["scopes"])
    edges = _merge_edges(a["scopes"], b["scopes"])
    for key in overlap:
        _subtract_step(chosen[key], nodes, edges)
    evidence = _union(a["evidence"], b["evidence"], "recorded_at", _scoped_key)
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "schema_version": SCHEMA_VERSION,
        "globals": _static(a["globals"], b["globals"], lambda n: n["id"]),
        "locals": _static(a["locals"], b["locals"], lambda n: n["id"]),
        "edges": sorted(
            _static(a["edges"], b["edges"], lambda e: (e["src"], e["dst"])),
            key=lambda e: (e["src"], e["dst"]),
        ),
        "scopes": _sections(nodes, edges),
        "evidence": _bound_evidence(evidence, rule.evidence_keep),
        "steps": steps,
        "flat": _union(a["flat"], b["flat"], "added_at", _scoped_key),
        "merges": _union(a["merges"], b["merges"], "merged_at",
                         lambda m: (m["from_scope"], m["into_scope"])),
    }  # fmt: skip


def _static(a: list[dict], b: list[dict], key) -> list[dict]:
    """The seed's part of nodes or edges: ``a``'s, then those only ``b`` has."""
    known = {key(item) for item in a}
    return [*a, *(item for item in b if key(item) not in known)]


def _merge_nodes(a: dict, b: dict) -> dict[tuple[str, str], NodeStats]:
    nodes: dict[tuple[str, str], NodeStats] = {}
    for sections in (a, b):
        for scope, section in sections.items():
            for node, data in section["nodes"].items():
                stats = NodeStats.from_dict(data)
                mine = nodes.get((scope, node))
                nodes[(scope, node)] = add_node_stats(mine, stats) if mine else stats
    return nodes


def _merge_edges(a: dict, b: dict) -> dict[tuple[str, str, str], EdgeStats]:
    edges: dict[tuple[str, str, str], EdgeStats] = {}
    for sections in (a, b):
        for scope, section in sections.items():
            for item in section["edges"]:
                stats = EdgeStats.from_dict(item["stats"])
                key = (scope, item["src"], item["dst"])
                mine = edges.get(key)
                edges[key] = add_edge_stats(mine, stats) if mine else stats
    return edges


def _sections(nodes: dict, edges: dict) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for (scope, node), stats in sorted(nodes.items()):
        out.setdefault(scope, {"nodes": {}, "edges": []})["nodes"][node] = stats.to_dict()
    for (scope, src, dst), stats in sorted(edges.items()):
        section = out.setdefault(scope, {"nodes": {}, "edges": []})
        section["edges"].append({"src": src, "dst": dst, "stats": stats.to_dict()})
    return out


def _subtract_step(step: dict[str, Any], nodes: dict, edges: dict) -> None:
    """Remove one step's contribution from its scope (it was counted by both sides)."""
    status, reward, scope = step["status"], step["reward"], step["scope"]
    success = int(Status(status).correct and reward > 0)
    ids = [step["direction"]] + ([step["local_id"]] if step["local_id"] is not None else [])
    for node in ids:
        s = nodes[(scope, node)]
        s.tries -= 1
        s.successes -= success
        s.reward_sum -= reward
        s.status_counts[status] -= 1
    for src, weight in zip(step["prefix"], step["weights"], strict=True):
        if weight > 0:
            e = edges[(scope, src, step["direction"])]
            e.count -= 1
            e.weight_sum -= weight
            e.reward_wsum -= weight * reward
            e.status_counts[status] -= 1


def _bound_evidence(items: list[dict[str, Any]], keep: int) -> list[dict[str, Any]]:
    """The evidence a bank would keep, computed by the bank's own pruning (one ranking only)."""
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE TABLE evidence ({codec.EVIDENCE_COLUMNS})")
    for item in items:
        codec.insert_evidence(conn, codec.Evidence(**item))
    groups = conn.execute("SELECT DISTINCT scope, local_id, polarity FROM evidence").fetchall()
    for scope, local_id, polarity in groups:
        prune_evidence(conn, local_id, polarity, keep, scope)
    rows = conn.execute(
        f"SELECT {codec.EVIDENCE_COLUMNS} FROM evidence ORDER BY scope, run_id, task_id, step"
    )
    result = [codec.evidence_from_row(r).__dict__ for r in rows]
    conn.close()
    return result
