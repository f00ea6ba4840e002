"""An endpoint that accepts the connection and never answers: the wait is shown as it goes and
ends at the timeout the user chose (``--llm-timeout``), never a silent five minutes a try."""

from __future__ import annotations

import logging
import socket
import threading

import pytest

from htam.llm import LLMClient, LLMConfig, LLMUnavailableError
from htam.llm import client as client_module


@pytest.fixture
def silent_endpoint():
    """A loopback server that accepts every connection and never writes a byte."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    stop.set()
    thread.join(timeout=5)
    for conn in held:
        conn.close()
    listener.close()


@pytest.mark.slow
def test_a_stuck_endpoint_shows_its_wait_and_stops_at_the_timeout(
    silent_endpoint, tmp_path, monkeypatch, caplog
):
    monkeypatch.setattr(client_module, "PROGRESS_EVERY_S", 0.3)
    monkeypatch.setattr(client_module, "LONG_WAIT_S", 0.8)
    config = LLMConfig(
        base_url=silent_endpoint, model="m", timeout_s=2.0, max_retries=1, backoff_s=0.01,
        cache_dir=tmp_path / "llm",
    )  # fmt: skip
    client = LLMClient(config, sleep=lambda s: None)
    with caplog.at_level(logging.INFO, logger="htam.llm"):
        with pytest.raises(LLMUnavailableError, match=r"no answer within 2s \(timeout\)"):
            client.chat([{"role": "user", "content": "hi"}])
    waits = [r for r in caplog.records if "no answer yet after" in r.getMessage()]
    assert {r.getMessage().split("attempt ")[1] for r in waits} == {"1 of 2)", "2 of 2)"}
    assert "(timeout 2 s" in waits[0].getMessage()
    # at INFO while short (--verbose shows it), one WARNING per attempt once it is long
    assert [r.levelno for r in waits].count(logging.WARNING) == 2
    assert not [t for t in threading.enumerate() if t.name == "htam-llm-progress"]


def test_the_timeout_option_reaches_the_client_and_its_help_says_the_default():
    from htam.bench.bench_config import ProposerSpec
    from htam.cli.llm_options import DEFAULT_LLM_TIMEOUT_S
    from htam.llm.presets import DEFAULT_TIMEOUT_S

    assert (
        DEFAULT_LLM_TIMEOUT_S == DEFAULT_TIMEOUT_S == LLMConfig(base_url="u", model="m").timeout_s
    )
    from htam.cli.llm_options import PRESET_NAMES
    from htam.llm.presets import PRESETS

    assert PRESET_NAMES == tuple(PRESETS)  # the --llm help lists every preset
    spec = ProposerSpec(base_url="http://127.0.0.1:9/v1", model="m", llm_timeout_s=7.0)
    assert spec.build("cpu", "cpp").client.config.timeout_s == 7.0
    assert ProposerSpec(base_url="http://127.0.0.1:9/v1").label().endswith("model none given")
