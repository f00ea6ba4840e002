"""Versioned JSON export and import of a bank, and the merge of two exports.

Merging adds the statistics of both sides and unions their ledgers and evidence; a step present
in both ledgers (the two banks share history) is counted once, by subtracting its contribution
from the sum. The EMA trend is the tries-weighted mean of both trends and an edge's fitted
advantage the weight-weighted mean of both fits: neither can be added, and for shared steps
neither can be un-added, so these two are approximations.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from typing import Any

from htam.memory import codec
from htam.memory.model import Edge, EdgeStats, NodeStats
from htam.memory.schema import SCHEMA_VERSION, MemoryBankError
from htam.memory.updates import UpdateRule, prune_evidence
from htam.status import Status

EXPORT_FORMAT = "htam-memory-export"
EXPORT_VERSION = 1
STEP_FIELDS = (
    "run_id, task_id, step, task_signature, direction, local_id, status, reward, prefix, "
    "weights, speedup_before, speedup_after, recorded_at"
)


def export_bank(conn: sqlite3.Connection) -> dict[str, Any]:
    """Everything in a bank as one JSON-serialisable dict."""
    globals_ = conn.execute(f"SELECT {codec.GLOBAL_COLUMNS} FROM global_nodes ORDER BY ord")
    locals_ = conn.execute(f"SELECT {codec.LOCAL_COLUMNS} FROM local_nodes ORDER BY ord")
    edges = conn.execute(f"SELECT {codec.EDGE_COLUMNS} FROM edges ORDER BY src, dst")
    evidence = conn.execute(
        f"SELECT {codec.EVIDENCE_COLUMNS} FROM evidence ORDER BY run_id, task_id, step"
    )
    steps = conn.execute(f"SELECT {STEP_FIELDS} FROM steps ORDER BY run_id, task_id, step")
    flat = conn.execute(
        "SELECT run_id, task_id, step, text, record, added_at FROM flat_experiences "
        "ORDER BY run_id, task_id, step"
    )
    step_names = [name.strip() for name in STEP_FIELDS.split(",")]
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "schema_version": SCHEMA_VERSION,
        "globals": [codec.global_to_dict(codec.global_from_row(r)) for r in globals_],
        "locals": [codec.local_to_dict(codec.local_from_row(r)) for r in locals_],
        "edges": [codec.edge_to_dict(codec.edge_from_row(r)) for r in edges],
        "evidence": [codec.evidence_from_row(r).__dict__ for r in evidence],
        "steps": [_step_from_row(dict(zip(step_names, r, strict=True))) for r in steps],
        "flat": [
            {
                "run_id": r[0],
                "task_id": r[1],
                "step": r[2],
                "text": r[3],
                "record": json.loads(r[4]),
                "added_at": r[5],
            }
            for r in flat
        ],
    }


def _step_from_row(row: dict[str, Any]) -> dict[str, Any]:
    row["prefix"] = json.loads(row["prefix"])
    row["weights"] = json.loads(row["weights"])
    return row


def check_export(data: dict[str, Any]) -> None:
    if not isinstance(data, dict) or data.get("format") != EXPORT_FORMAT:
        raise MemoryBankError(f"not an HTAM memory export (format {data.get('format')!r})")
    if data.get("version", 0) > EXPORT_VERSION:
        raise MemoryBankError(
            f"memory export version {data['version']} is newer than this HTAM "
            f"({EXPORT_VERSION}); upgrade htam"
        )


def load_into(conn: sqlite3.Connection, data: dict[str, Any]) -> None:
    """Insert a seed or an export into an empty schema (inside the caller's transaction)."""
    globals_ = [codec.global_from_dict(item) for item in data["globals"]]
    ids = [node.id for node in globals_]
    if len(set(ids)) != len(ids):
        raise ValueError(
            f"duplicate direction ids: {sorted(k for k, n in Counter(ids).items() if n > 1)}"
        )
    locals_ = [codec.local_from_dict(item) for item in data["locals"]]
    orphans = [node.id for node in locals_ if node.direction not in ids]
    if orphans:
        raise ValueError(f"locals under unknown directions: {orphans}")
    edges = [codec.edge_from_dict(item) for item in data.get("edges", [])]
    loose = [(e.src, e.dst) for e in edges if e.src not in ids or e.dst not in ids]
    if loose:
        raise ValueError(f"edges between unknown directions: {loose}")
    keyed: tuple[tuple[str, list[str] | list[tuple[str, str]]], ...] = (
        ("local", [n.id for n in locals_]),
        ("edge", [(e.src, e.dst) for e in edges]),
    )
    for kind, keys in keyed:
        repeated = sorted((k for k, n in Counter(keys).items() if n > 1), key=str)
        if repeated:
            raise ValueError(f"duplicate {kind} ids: {repeated}")
    for ord_, node in enumerate(globals_):
        codec.insert_global(conn, node, ord_)
    for ord_, local in enumerate(locals_):
        codec.insert_local(conn, local, ord_)
    for edge in edges:
        codec.insert_edge(conn, edge)
    for item in data.get("evidence", []):
        codec.insert_evidence(conn, codec.Evidence(**item))
    for item in data.get("steps", []):
        row = {**item, "prefix": json.dumps(item["prefix"]), "weights": json.dumps(item["weights"])}
        conn.execute(
            f"INSERT INTO steps ({STEP_FIELDS}) VALUES ({', '.join('?' * 13)})",
            [row[name.strip()] for name in STEP_FIELDS.split(",")],
        )
    for item in data.get("flat", []):
        conn.execute(
            "INSERT INTO flat_experiences (run_id, task_id, step, text, record, added_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (
                item["run_id"],
                item["task_id"],
                item["step"],
                item["text"],
                json.dumps(item["record"]),
                item["added_at"],
            ),
        )


def _key(item: dict[str, Any]) -> tuple[str, str, int]:
    return (item["run_id"], item["task_id"], item["step"])


def _add_node_stats(a: NodeStats, b: NodeStats) -> NodeStats:
    tries = a.tries + b.tries
    ema = (a.tries * a.ema + b.tries * b.ema) / tries if tries else 0.0
    counts = Counter(a.status_counts) + Counter(b.status_counts)
    return NodeStats(
        tries, a.successes + b.successes, a.reward_sum + b.reward_sum, ema, dict(counts)
    )


def _add_edge_stats(a: EdgeStats, b: EdgeStats) -> EdgeStats:
    """Sums add; the fitted advantage is the evidence-weighted mean of both fits."""
    counts = Counter(a.status_counts) + Counter(b.status_counts)
    weight = a.weight_sum + b.weight_sum
    fit = (a.fit * a.weight_sum + b.fit * b.weight_sum) / weight if weight > 0 else a.fit
    return EdgeStats(
        a.count + b.count,
        weight,
        a.reward_wsum + b.reward_wsum,
        fit,
        dict(counts),
    )


def _union(a: list[dict], b: list[dict], stamp: str) -> list[dict]:
    """Union by (run, task, step), sorted by key; of two copies the earlier-recorded one wins,
    so merge(a, b) and merge(b, a) keep the same records."""
    merged: dict[tuple, dict] = {}
    for item in [*a, *b]:
        key = _key(item)
        kept = merged.get(key)
        if kept is None or (item[stamp], json.dumps(item, sort_keys=True)) < (
            kept[stamp],
            json.dumps(kept, sort_keys=True),
        ):
            merged[key] = item
    return [merged[key] for key in sorted(merged)]


def merge(a: dict[str, Any], b: dict[str, Any], rule: UpdateRule) -> dict[str, Any]:
    """Merge two exports: statistics add (shared steps once), evidence and ledgers union.

    ``rule`` is the policy's update rule (a ``PolicyConfig``): its ``evidence_keep`` bounds
    the merged evidence.
    """
    check_export(a)
    check_export(b)
    overlap = sorted(set(map(_key, a["steps"])) & set(map(_key, b["steps"])))
    steps = _union(a["steps"], b["steps"], "recorded_at")
    chosen = {_key(step): step for step in steps}  # the copy that stays is the one subtracted
    globals_ = _merge_nodes(
        a["globals"], b["globals"], codec.global_from_dict, codec.global_to_dict
    )
    locals_ = _merge_nodes(a["locals"], b["locals"], codec.local_from_dict, codec.local_to_dict)
    edges = _merge_edges(a["edges"], b["edges"])
    for key in overlap:
        _subtract_step(chosen[key], globals_, locals_, edges)
    evidence = _bound_evidence(
        _union(a["evidence"], b["evidence"], "recorded_at"), rule.evidence_keep
    )
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "schema_version": SCHEMA_VERSION,
        "globals": [codec.global_to_dict(n) for n in globals_.values()],
        "locals": [codec.local_to_dict(n) for n in locals_.values()],
        "edges": [codec.edge_to_dict(e) for _, e in sorted(edges.items())],
        "evidence": evidence,
        "steps": steps,
        "flat": _union(a["flat"], b["flat"], "added_at"),
    }


def _merge_nodes(a: list[dict], b: list[dict], parse, dump) -> dict[str, Any]:
    """Static fields from ``a`` (then ``b`` for nodes only ``b`` has), statistics added."""
    nodes = {item["id"]: parse(item) for item in a}
    for item in b:
        other = parse(item)
        if other.id in nodes:
            nodes[other.id].stats = _add_node_stats(nodes[other.id].stats, other.stats)
        else:
            nodes[other.id] = other
    return nodes


def _merge_edges(a: list[dict], b: list[dict]) -> dict[tuple[str, str], Edge]:
    edges = {(item["src"], item["dst"]): codec.edge_from_dict(item) for item in a}
    for item in b:
        other = codec.edge_from_dict(item)
        mine = edges.get((other.src, other.dst))
        if mine is None:
            edges[(other.src, other.dst)] = other
        else:
            mine.stats = _add_edge_stats(mine.stats, other.stats)
    return edges


def _subtract_step(step: dict[str, Any], globals_, locals_, edges) -> None:
    """Remove one step's contribution (it was counted by both sides)."""
    status, reward = step["status"], step["reward"]
    success = int(Status(status).correct and reward > 0)
    nodes = [globals_[step["direction"]]]
    if step["local_id"] is not None:
        nodes.append(locals_[step["local_id"]])
    for node in nodes:
        s = node.stats
        s.tries -= 1
        s.successes -= success
        s.reward_sum -= reward
        s.status_counts[status] -= 1
    for src, weight in zip(step["prefix"], step["weights"], strict=True):
        if weight > 0:
            e = edges[(src, step["direction"])].stats
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
    groups = conn.execute("SELECT DISTINCT local_id, polarity FROM evidence").fetchall()
    for local_id, polarity in groups:
        prune_evidence(conn, local_id, polarity, keep)
    rows = conn.execute(
        f"SELECT {codec.EVIDENCE_COLUMNS} FROM evidence ORDER BY run_id, task_id, step"
    )
    result = [codec.evidence_from_row(r).__dict__ for r in rows]
    conn.close()
    return result
