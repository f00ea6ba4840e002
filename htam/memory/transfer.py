"""Versioned JSON export and import of a bank.

An export holds the seed knowledge once (``globals``, ``locals``, ``edges``) and what runs
learned per scope (``scopes``: node and edge statistics; evidence, steps and flat experiences
carry their scope). An export of version 1 (statistics inside the nodes, no scopes) is read
as a bank of schema 4 is migrated: its statistics go to the scope its steps name
(htam.memory.scopes.legacy_scope). The merge of two exports is :mod:`htam.memory.merging`.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from typing import Any

from htam.memory import codec, scopes
from htam.memory.export_format import EXPORT_FORMAT, EXPORT_VERSION, check_export, upgrade
from htam.memory.merging import merge
from htam.memory.model import EdgeStats, NodeStats
from htam.memory.schema import SCHEMA_VERSION

STEP_FIELDS = (
    "run_id, task_id, step, task_signature, direction, local_id, status, reward, prefix, "
    "weights, speedup_before, speedup_after, recorded_at, context, scope"
)
_JSON_STEP_FIELDS = ("prefix", "weights", "context")
MERGE_FIELDS = ("from_scope", "into_scope", "merged_at")

__all__ = [
    "EXPORT_FORMAT", "EXPORT_VERSION", "check_export", "export_bank", "load_into", "merge", "upgrade"
]  # fmt: skip


def export_bank(conn: sqlite3.Connection) -> dict[str, Any]:
    """Everything in a bank as one JSON-serialisable dict."""
    none = {"scope": None}  # the seed's columns only: no scope is named None
    globals_ = conn.execute(f"{codec.GLOBAL_SELECT} ORDER BY n.ord", none)
    locals_ = conn.execute(f"{codec.LOCAL_SELECT} ORDER BY n.ord", none)
    edges = conn.execute(f"SELECT {codec.EDGE_COLUMNS} FROM edges ORDER BY src, dst").fetchall()
    evidence = conn.execute(
        f"SELECT {codec.EVIDENCE_COLUMNS} FROM evidence ORDER BY scope, run_id, task_id, step"
    )
    steps = conn.execute(f"SELECT {STEP_FIELDS} FROM steps ORDER BY run_id, task_id, step")
    flat = conn.execute(
        "SELECT scope, run_id, task_id, step, text, record, added_at FROM flat_experiences "
        "ORDER BY scope, run_id, task_id, step"
    )
    merges = conn.execute(
        "SELECT from_scope, into_scope, merged_at FROM scope_merges ORDER BY merged_at"
    )
    step_names = [name.strip() for name in STEP_FIELDS.split(",")]
    flat_names = ("scope", "run_id", "task_id", "step", "text", "record", "added_at")
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "schema_version": SCHEMA_VERSION,
        "globals": [codec.global_to_dict(codec.global_from_row(r)) for r in globals_],
        "locals": [codec.local_to_dict(codec.local_from_row(r)) for r in locals_],
        "edges": [_static_edge(r) for r in edges],
        "scopes": _export_scopes(conn),
        "evidence": [codec.evidence_from_row(r).__dict__ for r in evidence],
        "steps": [_step_from_row(dict(zip(step_names, r, strict=True))) for r in steps],
        "flat": [
            {**dict(zip(flat_names, r, strict=True)), "record": json.loads(r[5])} for r in flat
        ],
        "merges": [dict(zip(MERGE_FIELDS, r, strict=True)) for r in merges],
    }


def _static_edge(row: tuple) -> dict[str, Any]:
    src, dst, applies_when, rationale, risks, prior, condition = row
    return {
        "src": src,
        "dst": dst,
        "applies_when": applies_when,
        "rationale": rationale,
        "risks": json.loads(risks),
        "prior_utility": prior,
        "when": json.loads(condition),
    }


def _export_scopes(conn: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    rows = conn.execute(
        f"SELECT scope, node, {scopes.STATS_COLUMNS} FROM node_stats ORDER BY scope, node"
    )
    for scope, node, *s in rows:
        node_stats = NodeStats(s[0], s[1], s[2], s[3], json.loads(s[4]))
        _scope(out, scope)["nodes"][node] = node_stats.to_dict()
    rows = conn.execute(
        f"SELECT scope, src, dst, {scopes.EDGE_STATS_COLUMNS} FROM edge_stats "
        "ORDER BY scope, src, dst"
    )
    for scope, src, dst, *s in rows:
        stats = EdgeStats(s[0], s[1], s[2], s[3], json.loads(s[4]))
        _scope(out, scope)["edges"].append({"src": src, "dst": dst, "stats": stats.to_dict()})
    return out


def _scope(out: dict[str, dict[str, Any]], scope: str) -> dict[str, Any]:
    return out.setdefault(scope, {"nodes": {}, "edges": []})


def _step_from_row(row: dict[str, Any]) -> dict[str, Any]:
    for name in _JSON_STEP_FIELDS:
        row[name] = json.loads(row[name])
    return row


def load_into(conn: sqlite3.Connection, data: dict[str, Any]) -> None:
    """Insert a seed or an export into an empty schema (inside the caller's transaction)."""
    data = upgrade(data)
    globals_ = [codec.global_from_dict(item) for item in data["globals"]]
    ids = [node.id for node in globals_]
    _unique("direction", ids)
    locals_ = [codec.local_from_dict(item) for item in data["locals"]]
    orphans = [node.id for node in locals_ if node.direction not in ids]
    if orphans:
        raise ValueError(f"locals under unknown directions: {orphans}")
    edges = [codec.edge_from_dict(item) for item in data.get("edges", [])]
    loose = [(e.src, e.dst) for e in edges if e.src not in ids or e.dst not in ids]
    if loose:
        raise ValueError(f"edges between unknown directions: {loose}")
    _unique("local", [n.id for n in locals_])
    _unique("edge", [(e.src, e.dst) for e in edges])
    for ord_, node in enumerate(globals_):
        codec.insert_global(conn, node, ord_)
    for ord_, local in enumerate(locals_):
        codec.insert_local(conn, local, ord_)
    for edge in edges:
        codec.insert_edge(conn, edge)
    _load_scopes(conn, data["scopes"], {*ids, *(n.id for n in locals_)})
    for item in data.get("evidence", []):
        codec.insert_evidence(conn, codec.Evidence(**item))
    names = [name.strip() for name in STEP_FIELDS.split(",")]
    for item in data.get("steps", []):
        row = {**item, **{k: json.dumps(item[k]) for k in _JSON_STEP_FIELDS}}
        conn.execute(
            f"INSERT INTO steps ({STEP_FIELDS}) VALUES ({', '.join('?' * len(names))})",
            [row[name] for name in names],
        )
    for item in data.get("flat", []):
        conn.execute(
            "INSERT INTO flat_experiences (scope, run_id, task_id, step, text, record, added_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (item["scope"], item["run_id"], item["task_id"], item["step"], item["text"],
             json.dumps(item["record"]), item["added_at"]),
        )  # fmt: skip
    for item in data.get("merges", []):
        conn.execute(
            "INSERT INTO scope_merges (from_scope, into_scope, merged_at) VALUES (?, ?, ?)",
            (item["from_scope"], item["into_scope"], item["merged_at"]),
        )


def _unique(kind: str, keys: list) -> None:
    repeated = sorted((k for k, n in Counter(keys).items() if n > 1), key=str)
    if repeated:
        raise ValueError(f"duplicate {kind} ids: {repeated}")


def _load_scopes(
    conn: sqlite3.Connection, sections: dict[str, dict[str, Any]], nodes: set[str]
) -> None:
    for scope, section in sections.items():
        unknown = sorted(set(section["nodes"]) - nodes)
        if unknown:
            raise ValueError(f"scope {scope!r}: statistics of unknown nodes {unknown}")
        for node, stats in section["nodes"].items():
            codec.insert_node_stats(conn, scope, node, NodeStats.from_dict(stats))
        for edge in section["edges"]:
            stats = EdgeStats.from_dict(edge["stats"])
            codec.insert_edge_stats(conn, scope, edge["src"], edge["dst"], stats)
