"""What the commands that can use an LLM check of it before they start: options that only make
sense together, and an endpoint that can serve the work."""

from __future__ import annotations

from typing import Annotated

import typer

from htam.cli.common import INFRASTRUCTURE_EXIT, err_console, fail

# Said here without importing the LLM side (an offline run never does); the tests keep them equal
# to htam.llm.presets' PRESETS and DEFAULT_TIMEOUT_S.
PRESET_NAMES = ("deepseek", "openai", "vllm", "sglang", "ollama", "llamacpp")
DEFAULT_LLM_TIMEOUT_S = 240.0

# The LLM option group, declared once for every command that can use an LLM (optimize, bench,
# transfer): ``llm: LlmPreset = None, base_url: BaseUrl = None, model: ModelName = None,
# llm_timeout: LlmTimeout = None``.
LlmPreset = Annotated[
    str | None,
    typer.Option(
        "--llm",
        help=f"LLM preset: {', '.join(PRESET_NAMES)} (default: the offline proposer, no LLM)",
    ),
]
BaseUrl = Annotated[
    str | None, typer.Option("--base-url", help="any OpenAI-compatible endpoint (with --model)")
]
ModelName = Annotated[
    str | None, typer.Option("--model", help="model name for --llm or --base-url")
]
LlmTimeout = Annotated[
    float | None,
    typer.Option(
        "--llm-timeout",
        min=1.0,
        help=f"seconds one LLM call may wait for its answer before it is retried (default "
        f"{DEFAULT_LLM_TIMEOUT_S:g}; a long wait is shown every 15 s with --verbose, and once "
        "after a minute)",
    ),
]


def check_llm_options(llm: str | None, base_url: str | None, model: str | None) -> None:
    """--model names a model of --llm or --base-url: alone it would be ignored (the offline
    proposer runs), so it is refused."""
    if model is not None and llm is None and base_url is None:
        fail("--model needs --llm PRESET or --base-url URL (without them no LLM is used)")


def preflight(proposer, quiet: bool = False) -> None:
    """An LLM endpoint that cannot serve the work stops it here (exit 3), in seconds: before the
    evaluator starts, the memory bank is opened or a worker runs (seen: a bench ran
    93 s, failed every unit on an unreachable endpoint and exited 0)."""
    if not hasattr(proposer, "check"):
        return  # not an LLM: an offline run never imports htam.llm
    from htam.llm.errors import LLMError

    try:
        note = proposer.check()
    except LLMError as exc:
        fail(f"the LLM endpoint cannot be used: {exc}", code=INFRASTRUCTURE_EXIT, outcome="stopped")
    if not quiet or note.startswith("warning"):
        err_console.print(f"LLM: {note}", highlight=False, soft_wrap=True, markup=False)


def build_proposer(spec, target: str, language: str, quiet: bool = False):
    """The proposer ``spec`` (a ``ProposerSpec``) builds, built here once so that bad settings
    and an endpoint that cannot serve fail before any run or worker starts."""
    try:
        proposer = spec.build(target, language)
    except Exception as exc:
        from htam.llm.errors import LLMError  # here only: an offline run never imports htam.llm

        if not isinstance(exc, (ImportError, AttributeError, TypeError, ValueError, LLMError)):
            raise
        if isinstance(exc, LLMError):  # it names the preset, the variable and what to do
            fail(str(exc))
        fail(f"cannot build the proposer {spec.label()}: {exc}")
    preflight(proposer, quiet)
    return proposer
