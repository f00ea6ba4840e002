"""Presets, keys from the environment only, and keys never leaking."""

from __future__ import annotations

import json

import pytest

from htam.llm import (
    PRESETS,
    LLMClient,
    LLMConfig,
    LLMConfigError,
    LLMRequestError,
    MissingKeyError,
    resolve_config,
)
from htam.llm.replay_server import Scripted

SECRET = "sk-test-0123456789-SECRET"
KEY_VARS = ["DEEPSEEK_API_KEY", "OPENAI_API_KEY", "HTAM_API_KEY", "VLLM_API_KEY"]


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch):
    for name in KEY_VARS + ["OPENAI_ORG_ID", "OPENAI_PROJECT_ID"]:
        monkeypatch.delenv(name, raising=False)


def test_presets_have_documented_endpoints():
    expected = {
        "deepseek": ("https://api.deepseek.com", "DEEPSEEK_API_KEY", True),
        "openai": ("https://api.openai.com/v1", "OPENAI_API_KEY", True),
        "vllm": ("http://localhost:8000/v1", "VLLM_API_KEY", False),
        "sglang": ("http://localhost:30000/v1", "SGLANG_API_KEY", False),
        "ollama": ("http://localhost:11434/v1", "OLLAMA_API_KEY", False),
        "llamacpp": ("http://localhost:8080/v1", "LLAMACPP_API_KEY", False),
    }
    assert {n: (p.base_url, p.api_key_env, p.key_required) for n, p in PRESETS.items()} == expected
    assert PRESETS["deepseek"].models == ("deepseek-chat", "deepseek-reasoner")


@pytest.mark.parametrize(
    ("preset", "var"), [("deepseek", "DEEPSEEK_API_KEY"), ("openai", "OPENAI_API_KEY")]
)
def test_missing_key_fails_at_once_naming_the_variable(preset, var):
    with pytest.raises(MissingKeyError) as info:
        resolve_config(preset, None, None)
    message = str(info.value)
    assert var in message and "run without --llm to use the offline proposer" in message
    assert info.value.env_var == var and "\n" not in message


def test_client_built_from_a_config_also_checks_the_key(tmp_path):
    config = LLMConfig(
        preset="deepseek",
        base_url="http://127.0.0.1:9",
        model="deepseek-chat",
        api_key_env="DEEPSEEK_API_KEY",
        key_required=True,
        cache_dir=tmp_path,
    )
    with pytest.raises(MissingKeyError, match="DEEPSEEK_API_KEY"):
        LLMClient(config)


def test_resolve_presets_and_overrides(monkeypatch):
    monkeypatch.setenv("DEEPSEEK_API_KEY", SECRET)
    config = resolve_config("deepseek", None, "deepseek-reasoner", temperature=0.3)
    assert (config.base_url, config.model, config.temperature) == (
        "https://api.deepseek.com",
        "deepseek-reasoner",
        0.3,
    )
    assert SECRET not in config.model_dump_json() and SECRET not in repr(config)
    local = resolve_config("vllm", None, "Qwen/Qwen2.5-Coder-32B-Instruct")
    assert local.api_key() == "EMPTY" and local.label == "vllm:Qwen/Qwen2.5-Coder-32B-Instruct"
    assert resolve_config("llamacpp", None, None).model == "default"
    custom = resolve_config(None, "http://gpu-box:9000/v1", "my-model")
    assert (custom.preset, custom.api_key_env, custom.api_key()) == (None, "HTAM_API_KEY", "EMPTY")
    monkeypatch.setenv("HTAM_API_KEY", SECRET)
    assert custom.api_key() == SECRET


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("nope", None, None), "unknown LLM preset 'nope'"),
        (("vllm", None, None), "preset 'vllm' needs --model"),
        ((None, "http://x/v1", None), "needs --model as well"),
        ((None, None, None), "choose an LLM preset"),
    ],
)
def test_resolve_errors(args, message):
    with pytest.raises(LLMConfigError, match=message):
        resolve_config(*args)


def test_key_only_in_the_authorization_header(server, tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPSEEK_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_ORG_ID", "org-private")
    server.add(Scripted("hello", reasoning="thinking"), Scripted.error(401, "bad key"))
    config = resolve_config("deepseek", server.base_url, None, cache_dir=tmp_path / "c")
    client = LLMClient(config)
    reply = client.chat([{"role": "user", "content": "hi"}])
    with pytest.raises(LLMRequestError) as info:
        client.chat([{"role": "user", "content": "again"}])
    assert SECRET not in str(info.value) and "DEEPSEEK_API_KEY" in str(info.value)
    for request in server.requests:
        assert request.headers["authorization"] == f"Bearer {SECRET}"
        others = {k: v for k, v in request.headers.items() if k.lower() != "authorization"}
        assert SECRET not in json.dumps(others) and SECRET not in request.body
        assert "org-private" not in json.dumps(others)  # OpenAI account headers stay home
    cache_files = list((tmp_path / "c").rglob("*"))
    assert any(p.suffix == ".json" for p in cache_files)
    assert all(SECRET not in p.read_text() for p in cache_files if p.is_file())
    assert SECRET not in repr(reply) and SECRET not in repr(client.config)


def test_bad_price_file_is_a_config_error(tmp_path, server):
    bad = tmp_path / "prices.json"
    bad.write_text(json.dumps({"m": {"input": "cheap"}}))
    config = LLMConfig(base_url=server.base_url, model="m", prices_path=bad, cache_dir=tmp_path)
    with pytest.raises(LLMConfigError, match="entry 'm' needs numeric 'input' and 'output'"):
        LLMClient(config)
    config = LLMConfig(base_url=server.base_url, model="m", prices_path=tmp_path / "missing.json")
    with pytest.raises(LLMConfigError, match="does not exist"):
        LLMClient(config)


def test_default_cache_dir_follows_htam_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("HTAM_CACHE_DIR", str(tmp_path / "root"))
    assert (
        LLMConfig(base_url="http://x", model="m").resolved_cache_dir() == tmp_path / "root" / "llm"
    )
    monkeypatch.delenv("HTAM_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    expected = tmp_path / "home" / ".cache" / "htam" / "llm"
    assert LLMConfig(base_url="http://x", model="m").resolved_cache_dir() == expected
