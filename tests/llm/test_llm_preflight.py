"""``LLMClient.check``: the preflight before a run, against the real loopback server."""

from __future__ import annotations

import socket

import pytest

from htam.llm import LLMRequestError, LLMUnavailableError
from htam.llm.replay_server import Scripted


def test_an_endpoint_serving_the_model_passes(server, make_client):
    note = make_client(model=server.model).check()
    assert "answers and serves 'replay-model'" in note
    assert [r.path for r in server.requests] == ["/v1/models"]


def test_a_model_not_listed_is_a_warning_only(server, make_client):
    assert make_client(model="other").check().startswith("warning: ")


@pytest.mark.parametrize(
    ("status", "error", "text"),
    [
        (401, LLMRequestError, "check the key in"),
        (402, LLMRequestError, "HTTP 402"),
        (503, LLMUnavailableError, "HTTP 503"),
    ],
)
def test_refusals_and_outages_are_infrastructure_errors(server, make_client, status, error, text):
    server.models_reply = Scripted.error(status, "no")
    with pytest.raises(error, match=text) as caught:
        make_client().check()
    assert caught.value.infrastructure
    assert len(server.requests) == 1  # no retries: a preflight answers in seconds


def test_a_route_missing_is_not_fatal(server, make_client):
    server.models_reply = Scripted.error(404, "no route")
    assert "answers (GET /models: HTTP 404)" in make_client().check()


def test_nothing_listening(make_client):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(LLMUnavailableError, match="Connection refused") as caught:
        make_client(base_url=f"http://127.0.0.1:{port}/v1").check()
    assert caught.value.infrastructure


def test_which_request_errors_stop_a_run():
    assert LLMRequestError("u", 401, "").infrastructure
    assert LLMRequestError("u", 404, "").infrastructure
    assert not LLMRequestError("u", 400, "prompt too long").infrastructure


def test_a_preset_without_its_key_is_one_line_that_says_what_to_export(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from htam.cli import app

    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    args = ["optimize", "level1/1_ReLU", "--target", "cpu", "--llm", "deepseek"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "run")])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0].startswith("error: preset 'deepseek' needs an API key in the environment "
                               "variable DEEPSEEK_API_KEY, which is not set; export")  # fmt: skip
