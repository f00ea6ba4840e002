"""How much of a decision each term of the score made (DESIGN §1's score, term by term).

A term moves the decision only by how much it differs between directions: a term equal for every
direction changes no probability. So a term's share of a decision is its spread over the
directions scored (max - min) over the sum of every term's spread. The terms:

- ``transition``: sum_k w_k * (U~(p_k -> g) - V(g)), what the prefix adds beyond V(g) (each
  U~ holds V(g), see htam.policy.scoring);
- ``value``: lam * V(g) plus the V(g) inside the prefix terms (sum_k w_k * V(g));
- ``prior``: prior(g | s_t);
- ``exploration``: c * sqrt(ln N / (1 + n_g)).
"""

from __future__ import annotations

from typing import Any

TERMS = ("transition", "value", "prior", "exploration")


def term_parts(terms: dict[str, Any]) -> dict[str, float]:
    """One direction's score split into TERMS (``terms``: a direction of score_terms)."""
    inside_value = sum(t["weight"] for t in terms["prefix_terms"]) * terms["value"]
    return {
        "transition": terms["prefix"] - inside_value,
        "value": terms["value_term"] + inside_value,
        "prior": terms["prior"],
        "exploration": terms["exploration"],
    }


def term_shares(breakdown: dict[str, Any]) -> dict[str, float] | None:
    """Each term's share of the decision in ``breakdown`` (a policy's explain()); None when the
    decision scored no directions (a repair, a flat or uniform decision) or nothing differed."""
    directions = breakdown.get("directions")
    if not directions or len(directions) < 2:
        return None
    parts = [term_parts(t) for t in directions.values()]
    spreads = {k: max(p[k] for p in parts) - min(p[k] for p in parts) for k in TERMS}
    total = sum(spreads.values())
    if total <= 0:
        return None
    return {k: spreads[k] / total for k in TERMS}
