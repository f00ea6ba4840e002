"""The LLM side: an OpenAI-compatible client, prompt templates, reply parsing, the LLM proposer,
and a loopback replay server that stands in for a model in tests.

Nothing here imports torch or the CLI.
"""

from htam.llm.client import ChatReply, LLMClient
from htam.llm.errors import (
    LLMConfigError,
    LLMError,
    LLMRequestError,
    LLMUnavailableError,
    MissingKeyError,
)
from htam.llm.llm_proposer import LLMProposer, StrategyAnswer
from htam.llm.parse import extract_code, extract_json, split_think
from htam.llm.presets import PRESETS, LLMConfig, Preset, resolve_config
from htam.llm.prices import Price, PriceTable
from htam.llm.prompt_templates import PathStep, Prompts, StateView

__all__ = [
    "PRESETS",
    "ChatReply",
    "LLMClient",
    "LLMConfig",
    "LLMConfigError",
    "LLMError",
    "LLMProposer",
    "LLMRequestError",
    "LLMUnavailableError",
    "MissingKeyError",
    "PathStep",
    "Preset",
    "Price",
    "PriceTable",
    "Prompts",
    "StateView",
    "StrategyAnswer",
    "extract_code",
    "extract_json",
    "resolve_config",
    "split_think",
]
