"""The replay server itself: protocol, script selection, script files."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from htam.llm import LLMClient, LLMConfig, LLMRequestError
from htam.llm.replay_server import ReplayServer, Scripted, dump_script


def post(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        url + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_speaks_chat_completions():
    with ReplayServer([Scripted("hello world", reasoning="r", completion_tokens=9)]) as srv:
        status, data = post(
            srv.base_url, {"model": "m1", "messages": [{"role": "user", "content": "a b c"}]}
        )
        assert srv.base_url.startswith("http://127.0.0.1:") and srv.base_url.endswith("/v1")
    assert status == 200 and data["object"] == "chat.completion" and data["model"] == "m1"
    assert data["choices"][0]["message"] == {
        "role": "assistant",
        "content": "hello world",
        "reasoning_content": "r",
    }
    assert data["usage"] == {"prompt_tokens": 3, "completion_tokens": 9, "total_tokens": 12}


def test_errors_exhaustion_and_routes():
    with ReplayServer([Scripted.error(503, "busy", retry_after=2)]) as srv:
        assert post(srv.base_url, {"messages": []}) == (
            503,
            {"error": {"message": "busy", "type": "replay_error", "code": 503}},
        )
        status, data = post(srv.base_url, {"messages": []})
        assert status == 400 and data["error"]["message"] == "replay script exhausted"
        with urllib.request.urlopen(srv.base_url + "/models", timeout=5) as response:
            assert json.loads(response.read())["data"][0]["id"] == "replay-model"
        assert [r.method for r in srv.requests] == ["POST", "POST", "GET"]


def test_when_and_repeat_select_replies(tmp_path):
    script = [
        Scripted('{"strategy_id": "a"}', when="strategy_id", repeat=True),
        Scripted("code 1"),
        Scripted("code 2"),
    ]
    with ReplayServer(script) as srv:
        client = LLMClient(LLMConfig(base_url=srv.base_url, model="m", cache=False))
        asks = ["write code", "choose: strategy_id?", "write code", "strategy_id again"]
        answers = [client.chat([{"role": "user", "content": a}]).content for a in asks]
        assert answers == ["code 1", '{"strategy_id": "a"}', "code 2", '{"strategy_id": "a"}']
        with pytest.raises(LLMRequestError, match="replay script exhausted"):
            client.chat([{"role": "user", "content": "write code"}])


def test_matcher_is_asked_first():
    def matcher(request):
        return Scripted("matched") if "special" in request.text() else None

    with ReplayServer([Scripted("scripted")], matcher=matcher) as srv:
        client = LLMClient(LLMConfig(base_url=srv.base_url, model="m", cache=False))
        assert client.chat([{"role": "user", "content": "special"}]).content == "matched"
        assert client.chat([{"role": "user", "content": "plain"}]).content == "scripted"


def test_script_file_round_trip(tmp_path):
    replies = [
        Scripted("one", reasoning="why", prompt_tokens=3),
        Scripted.error(429, retry_after=1),
    ]
    path = tmp_path / "script.json"
    path.write_text(dump_script(replies, model="scripted-coder"))
    server = ReplayServer.from_file(path)
    assert server.script == replies and server.model == "scripted-coder"
    (tmp_path / "list.json").write_text(json.dumps([{"content": "x"}]))
    assert ReplayServer.from_file(tmp_path / "list.json").script == [Scripted("x")]
    (tmp_path / "bad.json").write_text(json.dumps([{"text": "x"}]))
    with pytest.raises(ValueError, match=r"unknown replay reply keys \['text'\]"):
        ReplayServer.from_file(tmp_path / "bad.json")


def test_base_url_needs_a_running_server():
    with pytest.raises(RuntimeError, match="not running"):
        _ = ReplayServer().base_url
