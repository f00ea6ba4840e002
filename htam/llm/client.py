"""A chat client for any OpenAI-compatible endpoint, on the official ``openai`` SDK.

The SDK's own retries are off (``max_retries=0``) so that this module alone decides what is
retried (429, 5xx, 408, connection errors, timeouts, malformed bodies), how long it waits
(exponential backoff with seeded jitter, ``Retry-After`` honoured) and what the final error says.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import openai

from htam.llm.cache import ResponseCache, request_hash
from htam.llm.errors import LLMRequestError, LLMUnavailableError, one_line
from htam.llm.parse import split_think
from htam.llm.presets import LLMConfig
from htam.llm.prices import PriceTable
from htam.proposer import Usage

log = logging.getLogger(__name__)

RETRY_STATUSES = {408, 429}  # plus every 5xx
PREFLIGHT_TIMEOUT_S = 10.0  # a reachable endpoint lists its models in well under a second
# A wait for an answer says how long it has lasted this often (INFO: `--verbose` shows it), and
# once, when it passes LONG_WAIT_S, at WARNING: an endpoint that accepts and never answers is
# not silent until the timeout.
PROGRESS_EVERY_S = 15.0
LONG_WAIT_S = 60.0


@dataclass
class ChatReply:
    content: str  # the answer, with any <think> sections moved to ``reasoning``
    reasoning: str | None
    usage: Usage
    cached: bool
    model: str
    raw_request_hash: str
    finish_reason: str | None = None
    attempts: int = 0  # HTTP attempts made for this reply (0 when served from the cache)


class _Retryable(Exception):
    def __init__(self, cause: str, retry_after: float | None = None):
        super().__init__(cause)
        self.retry_after = retry_after


class LLMClient:
    def __init__(
        self,
        config: LLMConfig,
        *,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        prices: PriceTable | None = None,
    ):
        self.config = config
        self.url = config.base_url.rstrip("/")
        self.prices = prices or PriceTable.load(config.prices_path)
        cap = None if config.cache_max_mb is None else config.cache_max_mb * 1_000_000
        self.cache = ResponseCache(config.resolved_cache_dir(), cap) if config.cache else None
        self.total = Usage()  # over every call of this client
        self._sleep = sleep
        self._rng = rng or random.Random(config.seed)
        self._slots = threading.BoundedSemaphore(config.concurrency)
        self._lock = threading.Lock()
        self._unpriced_warned: set[str] = set()
        self._sdk = openai.OpenAI(
            api_key=config.api_key(),  # raises MissingKeyError naming the variable
            base_url=self.url,
            timeout=config.timeout_s,
            max_retries=0,
        )
        if "api.openai.com" not in self.url:
            # The SDK adds OPENAI_ORG_ID / OPENAI_PROJECT_ID headers from the environment; they
            # are OpenAI account details and must not go to other endpoints.
            self._sdk.organization = None
            self._sdk.project = None

    def check(self) -> str:
        """Preflight before a run: one ``GET /models``, no retries, a short timeout. Raises an
        LLMError (``infrastructure`` set) when the endpoint is unreachable, down or refuses the
        key; returns a one-line note (a model the endpoint does not list is a warning only:
        some servers serve any name, others list aliases)."""
        sdk = self._sdk.with_options(timeout=min(self.config.timeout_s, PREFLIGHT_TIMEOUT_S))
        try:
            models = [m.id for m in sdk.models.list(timeout=PREFLIGHT_TIMEOUT_S).data]
        except openai.APITimeoutError as e:
            cause = f"no answer within {PREFLIGHT_TIMEOUT_S:g}s (timeout)"
            raise LLMUnavailableError(self.url, 1, cause) from e
        except openai.APIConnectionError as e:
            raise LLMUnavailableError(self.url, 1, f"cannot connect ({_root_cause(e)})") from e
        except openai.APIStatusError as e:
            if e.status_code in (401, 402, 403):
                detail = _hint(e.status_code, one_line(_status_detail(e), 200), self.config)
                raise LLMRequestError(self.url, e.status_code, detail) from e
            if e.status_code >= 500:
                cause = f"HTTP {e.status_code}: {one_line(_status_detail(e), 200)}"
                raise LLMUnavailableError(self.url, 1, cause) from e
            # 404 (no /models route) or 429: the endpoint answers; the first chat call decides.
            return f"{self.url} answers (GET /models: HTTP {e.status_code})"
        except (openai.APIResponseValidationError, json.JSONDecodeError, TypeError):
            return f"{self.url} answers (its model list is not the OpenAI format)"
        if models and self.config.model not in models:
            shown = ", ".join(models[:5]) + (", ..." if len(models) > 5 else "")
            return f"warning: {self.url} does not list model {self.config.model!r} ({shown})"
        return f"{self.url} answers and serves {self.config.model!r}"

    def chat(self, messages: list[dict], **params: Any) -> ChatReply:
        """One chat completion. ``params`` override temperature, max_tokens, seed (None drops a
        parameter) and pass anything else to ``chat.completions.create``; ``cache_salt`` is
        hashed into the cache key but not sent (it separates otherwise identical requests)."""
        salt = params.pop("cache_salt", None)
        body = self._body(messages, params)
        keyed = {"base_url": self.url, **body} | ({"salt": salt} if salt is not None else {})
        key = request_hash(keyed)
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            return self._record(self._reply(hit, key, cached=True, attempts=0))
        with self._slots:
            response, attempts = self._send(body)
        data = _response_data(response)
        # A reply cut at max_tokens is the endpoint's fault, not an answer: kept, a rerun of the
        # step would be served the same fragment without asking again.
        if self.cache is not None and data["finish_reason"] != "length":
            self.cache.put(key, keyed, data)
        return self._record(self._reply(data, key, cached=False, attempts=attempts))

    def forget(self, reply: ChatReply) -> None:
        """Keep ``reply`` out of the cache: the caller found it unusable (prose where code was
        asked for, an answer that is not the JSON asked for). Cached, a rerun of the step
        would be served the endpoint's fault again without asking, as with a reply cut at
        max_tokens, which is never kept."""
        if self.cache is not None:
            self.cache.forget(reply.raw_request_hash)

    def _body(self, messages: list[dict], params: dict[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": messages,
            "temperature": self.config.temperature,
            "max_tokens": self.config.max_tokens,
            "seed": self.config.seed,
        }
        body.update(params)
        return {k: v for k, v in body.items() if v is not None}

    def _send(self, body: dict[str, Any]) -> tuple[Any, int]:
        attempts = 1 + self.config.max_retries
        cause = ""
        for attempt in range(attempts):
            try:
                with self._progress(attempt + 1, attempts):
                    return self._attempt(body), attempt + 1
            except _Retryable as e:
                cause = str(e)
                if attempt + 1 < attempts:
                    delay = self._delay(attempt, e.retry_after)
                    log.info("LLM %s: %s; retry %d in %.1fs", self.url, cause, attempt + 1, delay)
                    self._sleep(delay)
        raise LLMUnavailableError(self.url, attempts, cause)

    @contextmanager
    def _progress(self, attempt: int, attempts: int) -> Iterator[None]:
        """While one attempt waits for its answer, a line every PROGRESS_EVERY_S seconds."""
        done = threading.Event()
        started = time.monotonic()

        def tick() -> None:
            warned = False
            while not done.wait(PROGRESS_EVERY_S):
                waited = time.monotonic() - started
                level = logging.INFO
                if waited >= LONG_WAIT_S and not warned:
                    level, warned = logging.WARNING, True
                log.log(
                    level, "LLM %s: no answer yet after %.0f s (timeout %g s, attempt %d of %d)",
                    self.url, waited, self.config.timeout_s, attempt, attempts,
                )  # fmt: skip

        ticker = threading.Thread(target=tick, name="htam-llm-progress", daemon=True)
        ticker.start()
        try:
            yield
        finally:
            done.set()
            ticker.join()

    def _attempt(self, body: dict[str, Any]) -> Any:
        try:
            response = self._sdk.chat.completions.create(**body)
        except openai.APITimeoutError as e:
            raise _Retryable(f"no answer within {self.config.timeout_s:g}s (timeout)") from e
        except openai.APIConnectionError as e:
            raise _Retryable(f"cannot connect ({_root_cause(e)})") from e
        except openai.APIStatusError as e:
            detail = one_line(_status_detail(e), 200)
            if e.status_code in RETRY_STATUSES or e.status_code >= 500:
                raise _Retryable(f"HTTP {e.status_code}: {detail}", _retry_after(e)) from e
            raise LLMRequestError(
                self.url, e.status_code, _hint(e.status_code, detail, self.config)
            ) from e
        except (openai.APIResponseValidationError, json.JSONDecodeError) as e:
            # A 200 whose body is not a completion: a proxy hiccup more often than not.
            raise _Retryable(f"malformed response ({one_line(str(e), 200)})") from e
        if isinstance(response, str) or not getattr(response, "choices", None):
            # The SDK hands back the raw text when a 200 body is not JSON.
            raise _Retryable(f"malformed response: {one_line(str(response), 120)!r}")
        return response

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.config.backoff_max_s)
        ceiling = min(self.config.backoff_s * 2**attempt, self.config.backoff_max_s)
        return ceiling / 2 + self._rng.uniform(0, ceiling / 2)  # "equal jitter"

    def _reply(self, data: dict[str, Any], key: str, cached: bool, attempts: int) -> ChatReply:
        usage = Usage(
            prompt_tokens=data["prompt_tokens"],
            completion_tokens=data["completion_tokens"],
            cost_usd=0.0 if cached else self._cost(data),
            calls=1,
            cached_calls=1 if cached else 0,
        )
        return ChatReply(
            content=data["content"],
            reasoning=data["reasoning"],
            usage=usage,
            cached=cached,
            model=data["model"],
            raw_request_hash=key,
            finish_reason=data["finish_reason"],
            attempts=attempts,
        )

    def _cost(self, data: dict[str, Any]) -> float:
        price = self.prices.lookup(self.config.model) or self.prices.lookup(data["model"])
        if price is None:
            if self.config.model not in self._unpriced_warned:
                self._unpriced_warned.add(self.config.model)
                log.warning(
                    "no price for model %s: its cost counts as 0 (see HTAM_PRICES)",
                    self.config.model,
                )
            return 0.0
        return price.cost(
            data["prompt_tokens"], data["completion_tokens"], data["cached_prompt_tokens"]
        )

    def _record(self, reply: ChatReply) -> ChatReply:
        with self._lock:
            self.total.add(reply.usage)
        return reply


def _response_data(response: Any) -> dict[str, Any]:
    """The parts of a completion worth keeping, as plain JSON for the cache."""
    choice = response.choices[0]
    message = choice.message
    think, content = split_think(message.content or "")
    field = getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None)
    reasoning = "\n\n".join(p for p in (field, think) if p) or None
    usage = response.usage
    return {
        "content": content,
        "reasoning": reasoning,
        "model": response.model or "",
        "finish_reason": choice.finish_reason,
        "prompt_tokens": int(getattr(usage, "prompt_tokens", 0) or 0),
        "completion_tokens": int(getattr(usage, "completion_tokens", 0) or 0),
        "cached_prompt_tokens": _cached_prompt_tokens(usage),
    }


def _cached_prompt_tokens(usage: Any) -> int:
    if usage is None:
        return 0
    hit = getattr(usage, "prompt_cache_hit_tokens", None)  # DeepSeek
    if hit is None and usage.prompt_tokens_details is not None:  # OpenAI
        hit = usage.prompt_tokens_details.cached_tokens
    return int(hit or 0)


def _root_cause(error: BaseException) -> str:
    inner = error
    while inner.__cause__ is not None:
        inner = inner.__cause__
    return (
        one_line(f"{type(inner).__name__}: {inner}", 200)
        if inner is not error
        else one_line(str(error), 200)
    )


def _status_detail(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return error.message


def _retry_after(error: openai.APIStatusError) -> float | None:
    value = error.response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:  # an HTTP date: fall back to our own backoff
        return None


def _hint(status: int, detail: str, config: LLMConfig) -> str:
    if status in (401, 403):
        return f"{detail} (check the key in {config.api_key_env})"
    if status == 404:
        return f"{detail} (is {config.model!r} a model this endpoint serves?)"
    return detail
