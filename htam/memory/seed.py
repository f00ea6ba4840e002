"""The packaged seed knowledge (seed.json): directions, strategies and prior transitions.

Each seed strategy names the targets and languages it applies to (``targets``, ``languages``):
tensor cores, occupancy, TMA or CUDA graphs mean nothing to a CPU C++ run, and a run is
offered only the strategies for its own target and language (``applies``).
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from htam.vocab import LANGUAGES, Target

SEED_FORMAT = "htam-seed"
SEED_VERSION = 1


def load_seed() -> dict[str, Any]:
    """The seed written from public CUDA and Triton optimization practice."""
    text = resources.files("htam.memory").joinpath("seed.json").read_text(encoding="utf-8")
    data = json.loads(text)
    if data.get("format") != SEED_FORMAT or data.get("version") != SEED_VERSION:
        raise ValueError(f"seed.json: expected {SEED_FORMAT} v{SEED_VERSION}")
    return data


@functools.cache
def _scopes() -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    """Each seed strategy's (targets, languages), checked against the vocabulary."""
    known_targets = {str(t) for t in Target}
    known_languages = {str(lang) for langs in LANGUAGES.values() for lang in langs}
    scopes = {}
    for node in load_seed()["locals"]:
        targets = frozenset(node.get("targets", known_targets))
        languages = frozenset(node.get("languages", known_languages))
        if not targets <= known_targets or not languages <= known_languages:
            raise ValueError(f"seed.json: {node['id']} names an unknown target or language")
        scopes[node["id"]] = (targets, languages)
    return scopes


def applies(local_id: str, target: str | None, language: str | None) -> bool:
    """Whether the strategy ``local_id`` fits a run on ``target`` in ``language`` (None: any).
    A strategy the seed does not hold (learned or imported under a new id) fits every run."""
    scope = _scopes().get(local_id)
    if scope is None:
        return True
    targets, languages = scope
    return (not target or target in targets) and (not language or language in languages)
