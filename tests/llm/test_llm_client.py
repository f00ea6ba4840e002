"""The client against a real loopback server: retries, timeouts, errors, cache, costs."""

from __future__ import annotations

import json
import threading
import time

import pytest

from htam.llm import LLMClient, LLMConfig, LLMRequestError, LLMUnavailableError
from htam.llm.replay_server import ReplayServer, Scripted

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "say hi"}]


def test_plain_reply_sends_the_configured_request(server, make_client):
    server.add(Scripted("hi", prompt_tokens=12, completion_tokens=3))
    reply = make_client(temperature=0.2, max_tokens=100, seed=7).chat(MESSAGES)
    assert (reply.content, reply.reasoning, reply.cached, reply.attempts) == ("hi", None, False, 1)
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens, reply.usage.calls) == (
        12,
        3,
        1,
    )
    assert reply.model == "deepseek-chat" and len(reply.raw_request_hash) == 64
    body = server.chat_requests[0].json
    assert body == {
        "model": "deepseek-chat",
        "messages": MESSAGES,
        "temperature": 0.2,
        "max_tokens": 100,
        "seed": 7,
    }


def test_params_override_and_none_drops_a_parameter(server, make_client):
    server.add(Scripted("a"))
    make_client().chat(MESSAGES, temperature=0.0, seed=None, top_p=0.5)
    body = server.chat_requests[0].json
    assert body["temperature"] == 0.0 and body["top_p"] == 0.5 and "seed" not in body


def test_429_then_success_honours_retry_after(server, make_client, sleeps):
    server.add(Scripted.error(429, "slow down", retry_after=3), Scripted("ok"))
    reply = make_client().chat(MESSAGES)
    assert reply.content == "ok" and reply.attempts == 2
    assert sleeps == [3.0]
    assert len(server.chat_requests) == 2


def test_backoff_doubles_with_seeded_jitter(server, make_client, sleeps):
    server.add(Scripted.error(500), Scripted.error(503), Scripted.error(502), Scripted("ok"))
    reply = make_client(seed=1).chat(MESSAGES)
    assert reply.attempts == 4
    # equal jitter: the k-th wait lies in [c/2, c] for c = min(1 * 2**k, 8)
    assert [c / 2 <= s <= c for s, c in zip(sleeps, (1, 2, 4), strict=True)] == [True] * 3
    again = []
    with ReplayServer([Scripted.error(500)] * 3 + [Scripted("ok")]) as other:
        config = LLMConfig(base_url=other.base_url, model="m", cache=False, seed=1, backoff_s=1.0)
        LLMClient(config, sleep=again.append).chat(MESSAGES)
    assert again == list(sleeps)  # same seed, same jitter: runs are reproducible


def test_5xx_past_retries_raises_with_url_and_cause(server, make_client, sleeps):
    server.add(*[Scripted.error(500, "engine overloaded")] * 4)
    with pytest.raises(LLMUnavailableError) as info:
        make_client(max_retries=2).chat(MESSAGES)
    message = str(info.value)
    assert server.base_url in message and "HTTP 500" in message and "engine overloaded" in message
    assert "3 attempt(s)" in message and "\n" not in message
    assert info.value.attempts == 3 and len(sleeps) == 2 and len(server.chat_requests) == 3


def test_slow_answer_times_out_then_is_retried(server, make_client, sleeps):
    server.add(Scripted("late", delay_s=1.0), Scripted("on time"))
    start = time.monotonic()
    reply = make_client(timeout_s=0.25).chat(MESSAGES)
    assert reply.content == "on time" and reply.attempts == 2 and len(sleeps) == 1
    assert time.monotonic() - start < 1.0


def test_always_slow_endpoint_fails_with_timeout_cause(server, make_client):
    server.add(Scripted("late", delay_s=0.8, repeat=True))
    with pytest.raises(
        LLMUnavailableError, match=r"failed after 2 attempt\(s\): no answer within 0.2s"
    ):
        make_client(timeout_s=0.2, max_retries=1).chat(MESSAGES)


def test_malformed_body_is_retried(server, make_client):
    server.add(Scripted.malformed(), Scripted(body='"not an object"'), Scripted("fine"))
    reply = make_client().chat(MESSAGES)
    assert reply.content == "fine" and reply.attempts == 3


def test_unreachable_endpoint_names_url_and_cause(tmp_path, sleeps):
    with ReplayServer() as srv:
        url = srv.base_url  # a port that was just free and is closed again below
    config = LLMConfig(base_url=url, model="m", cache_dir=tmp_path, max_retries=1)
    with pytest.raises(LLMUnavailableError) as info:
        LLMClient(config, sleep=sleeps).chat(MESSAGES)
    assert url in str(info.value) and "cannot connect" in str(info.value)
    assert "Connect" in info.value.cause and len(sleeps) == 1


def test_4xx_is_not_retried_and_hints_at_the_key(server, make_client, sleeps):
    server.add(Scripted.error(401, "invalid api key"), Scripted("never"))
    with pytest.raises(LLMRequestError, match="HTTP 401.*invalid api key.*HTAM_API_KEY"):
        make_client().chat(MESSAGES)
    assert sleeps == [] and len(server.chat_requests) == 1


def test_reasoning_content_and_think_tags_are_kept(server, make_client):
    server.add(
        Scripted("answer A", reasoning="step by step"),
        Scripted("<think>\nweighing options\n</think>\n\nanswer B"),
    )
    client = make_client()
    first = client.chat(MESSAGES)
    second = client.chat(MESSAGES, cache_salt="second")
    assert (first.content, first.reasoning) == ("answer A", "step by step")
    assert (second.content, second.reasoning) == ("answer B", "weighing options")


def test_cost_follows_the_price_table_exactly(server, make_client, tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"my-model": {"input": 2.0, "output": 8.0}}))
    server.add(Scripted("x", prompt_tokens=1_000_000, completion_tokens=250_000))
    server.add(Scripted("y", prompt_tokens=1000, completion_tokens=500))
    priced = make_client(model="my-model", prices_path=prices).chat(MESSAGES)
    assert priced.usage.cost_usd == 4.0  # 1M * $2 + 0.25M * $8
    packaged = make_client(model="deepseek-chat").chat(MESSAGES)
    assert packaged.usage.cost_usd == pytest.approx((1000 * 0.28 + 500 * 0.42) / 1e6, rel=1e-12)


def test_prices_file_from_environment(server, make_client, tmp_path, monkeypatch):
    prices = tmp_path / "env-prices.json"
    prices.write_text(json.dumps({"deepseek-chat": {"input": 1.0, "output": 1.0}}))
    monkeypatch.setenv("HTAM_PRICES", str(prices))
    server.add(Scripted("x", prompt_tokens=600_000, completion_tokens=400_000))
    assert make_client().chat(MESSAGES).usage.cost_usd == 1.0


def test_unpriced_model_costs_zero(server, make_client):
    server.add(Scripted("x", prompt_tokens=10, completion_tokens=10))
    assert make_client(model="local/qwen").chat(MESSAGES).usage.cost_usd == 0.0


def test_cached_rerun_makes_no_request_and_costs_nothing(server, make_client, tmp_path):
    server.add(Scripted("cached answer", reasoning="why", prompt_tokens=100, completion_tokens=40))
    first = make_client().chat(MESSAGES)
    again = make_client().chat(MESSAGES)  # a new client: the cache is on disk
    assert len(server.chat_requests) == 1
    assert (again.content, again.reasoning, again.cached, again.attempts) == (
        "cached answer",
        "why",
        True,
        0,
    )
    assert first.usage.cost_usd > 0 and again.usage.cost_usd == 0.0
    assert (again.usage.prompt_tokens, again.usage.completion_tokens) == (100, 40)
    assert (again.usage.calls, again.usage.cached_calls) == (1, 1)
    assert again.raw_request_hash == first.raw_request_hash
    files = list((tmp_path / "llm-cache").rglob("*.json"))
    assert len(files) == 1 and not list((tmp_path / "llm-cache").rglob("*.tmp"))


def test_cache_key_covers_the_whole_request(server, make_client):
    server.add(Scripted("r", repeat=True))
    client = make_client()
    hashes = {
        client.chat(MESSAGES).raw_request_hash,
        client.chat(MESSAGES, temperature=0.1).raw_request_hash,
        client.chat(MESSAGES, max_tokens=10).raw_request_hash,
        client.chat(MESSAGES, seed=3).raw_request_hash,
        client.chat(MESSAGES[:1]).raw_request_hash,
        client.chat(MESSAGES, cache_salt="step=2").raw_request_hash,
        make_client(model="other").chat(MESSAGES).raw_request_hash,
    }
    assert len(hashes) == 7 and len(server.chat_requests) == 7


def test_cache_off_always_asks(server, make_client):
    server.add(Scripted("r", repeat=True))
    client = make_client(cache=False)
    assert [client.chat(MESSAGES).cached for _ in range(2)] == [False, False]
    assert len(server.chat_requests) == 2


def test_concurrency_is_bounded_by_the_client(server, make_client):
    server.add(Scripted("r", delay_s=0.15, repeat=True))
    client = make_client(concurrency=2, cache=False)
    threads = [threading.Thread(target=client.chat, args=(MESSAGES,)) for _ in range(4)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert time.monotonic() - start >= 0.3  # two waves of two
    assert len(server.chat_requests) == 4 and server.max_in_flight == 2
    assert client.total.calls == 4


def test_total_usage_accumulates(server, make_client):
    server.add(Scripted("a", prompt_tokens=5, completion_tokens=1))
    server.add(Scripted("b", prompt_tokens=7, completion_tokens=2))
    client = make_client()
    client.chat(MESSAGES)
    client.chat(MESSAGES, cache_salt="2")
    client.chat(MESSAGES)  # cached
    t = client.total
    assert (t.prompt_tokens, t.completion_tokens, t.calls, t.cached_calls) == (17, 4, 3, 1)


def test_a_reply_cut_at_max_tokens_is_not_cached(server, make_client):
    server.add(Scripted("```python\nclass ModelNew(", finish_reason="length"))
    server.add(Scripted("the whole answer"))
    assert make_client().chat(MESSAGES).finish_reason == "length"
    again = make_client().chat(MESSAGES)  # asked again, not served the fragment
    assert (again.content, again.cached) == ("the whole answer", False)
    assert len(server.chat_requests) == 2
