"""What the commands that can use an LLM check of it before they start: options that only make
sense together, and an endpoint that can serve the work."""

from __future__ import annotations

from htam.cli.common import INFRASTRUCTURE_EXIT, err_console, fail


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
        fail(f"cannot build the proposer {spec.label()}: {exc}")
    preflight(proposer, quiet)
    return proposer
