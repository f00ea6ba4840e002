"""A suite's lanes ask the endpoint at once: while one task's step is judged, the other lanes'
LLM calls are in flight (each lane's client bounded by its concurrency setting)."""

import pytest
from typer.testing import CliRunner

from htam.cli import app
from htam.llm.replay_server import ReplayServer, Scripted

pytestmark = pytest.mark.slow


def test_the_lanes_llm_calls_overlap(tmp_path):
    # every reply takes 4 s and brings no code: the steps end `no_code`, nothing is built
    with ReplayServer(
        [Scripted(content="Tiling would help here.", delay_s=4.0, repeat=True)]
    ) as server:
        result = CliRunner().invoke(app, [
            "optimize", "builtin", "--levels", "1", "--tasks", "[134]_*", "--steps", "2",
            "--target", "cpu", "--language", "triton", "--workers", "3",
            "--base-url", server.base_url, "--model", "replay-model",
            "--out", str(tmp_path / "batch"),
        ])  # fmt: skip
        assert result.exit_code in (0, 1), result.output
        assert len(server.chat_requests) >= 3, result.output
        assert server.max_in_flight >= 2, (server.max_in_flight, result.output)
