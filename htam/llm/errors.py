"""Errors of the LLM side, each with a one-line message that says what to do next."""

from __future__ import annotations


def one_line(text: str, limit: int = 300) -> str:
    """Collapse whitespace so a message fits one log line; cut long server bodies."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


class LLMError(Exception):
    """Base of every failure of the LLM client; ``str(e)`` is one line.

    ``infrastructure`` marks failures of the endpoint itself (unreachable, overloaded, bad key,
    no quota, unknown model): they say nothing about a kernel, so a run stops on them instead of
    recording them in the memory."""

    infrastructure = False

    def __init__(self, message: str):
        super().__init__(one_line(message, limit=600))


class LLMConfigError(LLMError):
    """The configuration cannot work (unknown preset, no model, bad price file)."""


class MissingKeyError(LLMConfigError):
    def __init__(self, preset: str, env_var: str):
        self.env_var = env_var
        super().__init__(
            f"preset {preset!r} needs an API key in the environment variable {env_var}, which is "
            f"not set; export {env_var}=... or run without --llm to use the offline proposer"
        )


class LLMUnavailableError(LLMError):
    """The endpoint could not be used after all retries (connection, timeout, 429, 5xx)."""

    infrastructure = True

    def __init__(self, url: str, attempts: int, cause: str):
        self.url = url
        self.attempts = attempts
        self.cause = cause
        super().__init__(f"LLM endpoint {url} failed after {attempts} attempt(s): {cause}")


# Refusals about the account or the endpoint, not about one request: unauthorized, payment or
# quota, forbidden, no such model or route. A 400 or 413 (say, a prompt too long) is about the
# request and stays a failed step.
INFRASTRUCTURE_STATUSES = {401, 402, 403, 404}


class LLMRequestError(LLMError):
    """The endpoint refused the request (4xx other than 429): retrying cannot help."""

    def __init__(self, url: str, status: int, detail: str):
        self.url = url
        self.status = status
        self.infrastructure = status in INFRASTRUCTURE_STATUSES
        super().__init__(f"LLM endpoint {url} refused the request (HTTP {status}): {detail}")
