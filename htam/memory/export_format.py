"""The export's format: its name and version, the check of a file claimed to be one, and the
upgrade of an older export (or a seed) to the current layout."""

from __future__ import annotations

from typing import Any

from htam.memory import scopes
from htam.memory.model import EdgeStats, NodeStats
from htam.memory.schema import MemoryBankError

EXPORT_FORMAT = "htam-memory-export"
EXPORT_VERSION = 2


def check_export(data: dict[str, Any]) -> None:
    if not isinstance(data, dict) or data.get("format") != EXPORT_FORMAT:
        raise MemoryBankError(f"not an HTAM memory export (format {data.get('format')!r})")
    if data.get("version", 0) > EXPORT_VERSION:
        raise MemoryBankError(
            f"memory export version {data['version']} is newer than this HTAM "
            f"({EXPORT_VERSION}); upgrade htam"
        )


def upgrade(data: dict[str, Any]) -> dict[str, Any]:
    """An export (or a seed) in the current layout: one without scopes has its statistics, which
    its nodes and edges carry, moved to the scope its steps name (as the bank migration does)."""
    if "scopes" in data:
        return data
    steps = [dict(s) for s in data.get("steps", [])]
    legacy = scopes.legacy_scope([s.get("context", {}).get("target", "") for s in steps])
    for step in steps:
        step.setdefault("context", {})
        step["scope"] = legacy
    section: dict[str, Any] = {"nodes": {}, "edges": []}
    for node in [*data.get("globals", []), *data.get("locals", [])]:
        node_stats = NodeStats.from_dict(node.get("stats"))
        if node_stats.tries:
            section["nodes"][node["id"]] = node_stats.to_dict()
    for edge in data.get("edges", []):
        if not edge.get("stats"):
            continue  # a seed's edge: not taken, its fit is its prior
        stats = EdgeStats.from_dict(edge["stats"])
        if stats.count or stats.fit != edge.get("prior_utility", 0.0):
            section["edges"].append(
                {"src": edge["src"], "dst": edge["dst"], "stats": stats.to_dict()}
            )
    evidence = [
        {**e, "scope": e.get("context", {}).get("target") or legacy}
        for e in data.get("evidence", [])
    ]
    flat = [{**f, "scope": _flat_scope(f, legacy)} for f in data.get("flat", [])]
    return {
        **data,
        "version": EXPORT_VERSION,
        "scopes": {legacy: section} if section["nodes"] or section["edges"] else {},
        "steps": steps,
        "evidence": evidence,
        "flat": flat,
        "merges": [],
    }


def _flat_scope(item: dict[str, Any], legacy: str) -> str:
    if item["run_id"] == "seed":
        return scopes.SHARED
    return item["record"].get("context", {}).get("target") or legacy
