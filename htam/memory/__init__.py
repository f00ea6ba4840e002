"""The Hierarchical Transition Graph memory (DESIGN §1), stored in one SQLite file per bank."""

from htam.memory.flat import FlatHit, FlatMemory
from htam.memory.guidance import choice_guidance, estimate_tokens, guidance
from htam.memory.model import (
    Edge,
    EdgeStats,
    Evidence,
    GlobalNode,
    LocalNode,
    NodeStats,
    StepRecord,
)
from htam.memory.schema import SCHEMA_VERSION, MemoryBankError
from htam.memory.seed import load_seed
from htam.memory.store import MemoryBank
from htam.memory.transfer import merge

__all__ = [
    "SCHEMA_VERSION",
    "Edge",
    "EdgeStats",
    "Evidence",
    "FlatHit",
    "FlatMemory",
    "GlobalNode",
    "LocalNode",
    "MemoryBank",
    "MemoryBankError",
    "NodeStats",
    "StepRecord",
    "choice_guidance",
    "estimate_tokens",
    "guidance",
    "load_seed",
    "merge",
]
