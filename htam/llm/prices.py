"""Price table: USD per 1M tokens by model, packaged JSON overridable by a user file."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from htam.llm.errors import LLMConfigError

PRICES_ENV = "HTAM_PRICES"
_DATE_SUFFIX = re.compile(r"-\d{4}-\d{2}-\d{2}$")  # "gpt-4o-2024-08-06" is priced as "gpt-4o"


@dataclass(frozen=True)
class Price:
    input: float
    output: float
    cached_input: float | None = None

    def cost(
        self, prompt_tokens: int, completion_tokens: int, cached_prompt_tokens: int = 0
    ) -> float:
        cached = min(cached_prompt_tokens, prompt_tokens)
        cached_rate = self.input if self.cached_input is None else self.cached_input
        usd = (prompt_tokens - cached) * self.input + cached * cached_rate
        return (usd + completion_tokens * self.output) / 1e6


class PriceTable:
    def __init__(self, prices: dict[str, Price]):
        self.prices = prices

    def lookup(self, model: str) -> Price | None:
        if model in self.prices:
            return self.prices[model]
        return self.prices.get(_DATE_SUFFIX.sub("", model))

    @classmethod
    def load(cls, path: str | Path | None = None) -> PriceTable:
        """Packaged table, updated by the file at ``path`` or $HTAM_PRICES (user entries win)."""
        packaged = resources.files("htam.llm").joinpath("prices.json").read_text()
        table = _parse(json.loads(packaged), "packaged prices.json")
        user = path or os.environ.get(PRICES_ENV)
        if user:
            table.update(_parse(_read_json(Path(user)), str(user)))
        return cls(table)


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError as e:
        raise LLMConfigError(f"price file {path} does not exist") from e
    except json.JSONDecodeError as e:
        raise LLMConfigError(f"price file {path} is not valid JSON: {e}") from e


def _parse(data: dict, where: str) -> dict[str, Price]:
    if not isinstance(data, dict):
        raise LLMConfigError(f"{where}: expected an object of model -> prices")
    table = {}
    for model, entry in data.items():
        if model.startswith("_"):  # comments
            continue
        try:
            table[model] = Price(
                input=float(entry["input"]),
                output=float(entry["output"]),
                cached_input=None
                if entry.get("cached_input") is None
                else float(entry["cached_input"]),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise LLMConfigError(
                f"{where}: entry {model!r} needs numeric 'input' and 'output' (USD per 1M tokens)"
            ) from e
    return table
