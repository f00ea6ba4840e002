"""Endpoint presets and the client configuration.

Keys are read from environment variables only, at the moment a client is built; the config holds
the variable's *name*, never its value, so configs can be logged and stored safely.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from htam.llm.errors import LLMConfigError, MissingKeyError

CUSTOM_KEY_ENV = "HTAM_API_KEY"  # key for any --base-url endpoint (optional)
NO_KEY = "EMPTY"  # sent when a local server needs no key (the SDK insists on some value)


@dataclass(frozen=True)
class Preset:
    name: str
    base_url: str
    api_key_env: str
    key_required: bool
    default_model: str | None  # None: the server serves a model the user must name
    models: tuple[str, ...] = ()  # known model names (documentation and price table)


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "deepseek",
            "https://api.deepseek.com",
            "DEEPSEEK_API_KEY",
            True,
            "deepseek-chat",
            ("deepseek-chat", "deepseek-reasoner"),
        ),
        Preset(
            "openai",
            "https://api.openai.com/v1",
            "OPENAI_API_KEY",
            True,
            "gpt-4.1-mini",
            ("gpt-4.1", "gpt-4.1-mini", "gpt-4o", "gpt-4o-mini", "o3-mini", "o4-mini"),
        ),
        Preset("vllm", "http://localhost:8000/v1", "VLLM_API_KEY", False, None),
        Preset("sglang", "http://localhost:30000/v1", "SGLANG_API_KEY", False, "default"),
        Preset("ollama", "http://localhost:11434/v1", "OLLAMA_API_KEY", False, None),
        Preset("llamacpp", "http://localhost:8080/v1", "LLAMACPP_API_KEY", False, "default"),
    )
}


DEFAULT_TIMEOUT_S = 240.0


class LLMConfig(BaseModel):
    """Everything that defines a client. Safe to log and store: it holds no secret."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    preset: str | None = None  # None for a custom --base-url endpoint
    base_url: str
    model: str
    api_key_env: str = CUSTOM_KEY_ENV
    key_required: bool = False
    temperature: float = 0.7
    max_tokens: int = 8192
    # per HTTP attempt (--llm-timeout): a reasoning model writes 8192 tokens in about 2-4 min;
    # a stuck endpoint is retried after it (and its wait is shown meanwhile: LLMClient)
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0)
    max_retries: int = Field(default=4, ge=0)  # attempts = 1 + max_retries
    backoff_s: float = 2.0  # first retry waits about this long, doubling each time
    backoff_max_s: float = 60.0
    concurrency: int = Field(default=4, ge=1)  # simultaneous requests of one client
    cache: bool = True
    cache_dir: Path | None = None  # None: $HTAM_CACHE_DIR/llm or ~/.cache/htam/llm
    cache_max_mb: int | None = Field(
        default=1024, ge=1
    )  # least recently used go first; None: no cap
    prices_path: Path | None = None  # None: $HTAM_PRICES or the packaged table
    seed: int | None = 0  # sent as the request seed and seeds retry jitter; None: not sent

    @property
    def label(self) -> str:
        return f"{self.preset or 'custom'}:{self.model}"

    def api_key(self) -> str:
        """The key from the environment, read now; raises when a required key is missing."""
        value = os.environ.get(self.api_key_env, "").strip()
        if value:
            return value
        if self.key_required:
            raise MissingKeyError(self.preset or self.base_url, self.api_key_env)
        return NO_KEY

    def resolved_cache_dir(self) -> Path:
        if self.cache_dir is not None:
            return Path(self.cache_dir)
        root = os.environ.get("HTAM_CACHE_DIR")
        base = Path(root) if root else Path.home() / ".cache" / "htam"
        return base / "llm"


def resolve_config(
    preset: str | None, base_url: str | None, model: str | None, **overrides
) -> LLMConfig:
    """Build a config from a preset name and/or an explicit endpoint, and check the key now.

    ``base_url``/``model`` override the preset's. Without a preset, ``base_url`` and ``model``
    are both needed and the key (optional) comes from HTAM_API_KEY. Fails at once, with the
    variable's name, when the preset needs a key that is not set.
    """
    if preset is not None:
        if preset not in PRESETS:
            raise LLMConfigError(
                f"unknown LLM preset {preset!r}; choose one of {', '.join(PRESETS)} "
                "or give --base-url and --model"
            )
        p = PRESETS[preset]
        fields = {
            "preset": p.name,
            "base_url": base_url or p.base_url,
            "model": model or p.default_model,
            "api_key_env": p.api_key_env,
            "key_required": p.key_required,
        }
        if fields["model"] is None:
            raise LLMConfigError(
                f"preset {preset!r} needs --model: the name of the model the server at "
                f"{fields['base_url']} serves"
            )
    elif base_url is not None:
        if not model:
            raise LLMConfigError(f"--base-url {base_url} needs --model as well")
        fields = {"preset": None, "base_url": base_url, "model": model}
    else:
        raise LLMConfigError(
            f"choose an LLM preset ({', '.join(PRESETS)}) or give --base-url and --model"
        )
    config = LLMConfig(**{**fields, **overrides})
    config.api_key()  # fail now, not at the first step of a long run
    return config
