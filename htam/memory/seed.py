"""The packaged seed knowledge (seed.json): directions, strategies and prior transitions."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

SEED_FORMAT = "htam-seed"
SEED_VERSION = 1


def load_seed() -> dict[str, Any]:
    """The seed written from public CUDA and Triton optimization practice."""
    text = resources.files("htam.memory").joinpath("seed.json").read_text(encoding="utf-8")
    data = json.loads(text)
    if data.get("format") != SEED_FORMAT or data.get("version") != SEED_VERSION:
        raise ValueError(f"seed.json: expected {SEED_FORMAT} v{SEED_VERSION}")
    return data
