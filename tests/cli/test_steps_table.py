"""The steps table of ``htam optimize``: whole names at 80 columns, and after ``--resume`` the
steps found done too (the last line counts them)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from htam.cli import optimize_view
from htam.offline.strategies import STRATEGIES


def _record(step: int, strategy: str | None) -> dict:
    return {
        "step": step,
        "direction": strategy.split(".")[0] if strategy else "memory_access_optimization",
        "strategy": strategy,
        "proposal": {"baseline": strategy is None},
        "feedback": {"status": "ok", "speedup": 2.5},
        "usage": {"cost_usd": 0.0},
        "best_speedup": 2.5,
        "wall_s": 31.0,
    }


def _render(view, width: int) -> str:
    out = Console(width=width, record=True)
    out.print(view.table)
    return out.export_text()


@pytest.mark.parametrize("width", [80, 100, 200])
def test_no_strategy_name_is_cut_mid_word(width, monkeypatch):
    monkeypatch.setattr(optimize_view.console, "width", width)
    longest = sorted(STRATEGIES, key=len)[-4:]
    view = optimize_view.StepsView("t", 5, quiet=True)
    for i, sid in enumerate(longest):
        view.add(_record(i, sid))
    text = _render(view, width)
    assert max(map(len, text.splitlines())) <= width
    for sid in longest:
        for part in sid.split("."):
            assert part in text, (part, text)


def test_a_resumed_run_shows_the_steps_it_found_done():
    view = optimize_view.StepsView("t", 4, quiet=True, earlier=[_record(0, None)])
    view.add(_record(1, sorted(STRATEGIES)[0]))
    text = _render(view, 120)
    assert "│ 0*" in text and "│ 1 " in text
    assert "* ran before --resume" in text
    assert view.done == 2


def test_resuming_another_task_says_so_not_that_the_file_changed(tmp_path, monkeypatch):
    from types import SimpleNamespace

    import typer

    from htam.cli import optimize_runs

    lines = []
    monkeypatch.setattr(optimize_runs, "fail", lambda m: (lines.append(m), typer.Exit(2))[1])
    record = {"task_id": "builtin/level1/1_ReLU", "task_digest": "a", "method": "htam"}
    task = SimpleNamespace(id="builtin/level1/2_GELU", digest="b")
    config = SimpleNamespace(method="htam", seed=0, target="cpu", language="cpp")
    optimize_runs.check_resume(Path(tmp_path), record, task, config, "offline", "large")
    assert lines == [
        f"cannot resume {tmp_path}: TASK was builtin/level1/1_ReLU, now builtin/level1/2_GELU"
    ]


def test_a_step_line_says_what_went_wrong_when_it_is_not_the_kernels_doing(monkeypatch):
    lines: list[str] = []
    monkeypatch.setattr(optimize_view.console, "print", lambda text, **kw: lines.append(text))
    view = optimize_view.StepsView("t", 3)
    refused = "LLM endpoint http://h/v1 refused the request (HTTP 400): [context] too long"
    view.add(_record(0, None) | {"feedback": {"status": "no_code", "fault": "endpoint",
                                              "messages": [refused]}})  # fmt: skip
    view.add(_record(1, None) | {"feedback": {"status": "compile_error", "fault": "kernel",
                                              "messages": ["main.cpp line 3: error"]}})  # fmt: skip
    assert lines[0].endswith("(best 2.50x, 31 s) · " + refused.replace("[", "\\["))
    assert lines[1].endswith("(best 2.50x, 31 s)")  # the kernel's failure: its status says it


def test_a_faster_step_within_the_noise_says_why_it_is_not_the_best(monkeypatch):
    """Seen: `ok 4.32x (best 4.01x)`, and the run kept 4.01x: 4.32x was within the timing
    noise of the best, so it did not replace it; the line says so."""
    lines: list[str] = []
    monkeypatch.setattr(optimize_view.console, "print", lambda text, **kw: lines.append(text))
    view = optimize_view.StepsView("t", 3)
    best = _record(0, None) | {"feedback": {"status": "ok", "speedup": 4.01}, "new_best": True}
    view.add(best | {"best_speedup": 4.01})
    tie = {"feedback": {"status": "ok", "speedup": 4.32}, "new_best": False, "best_speedup": 4.01}
    view.add(_record(1, None) | tie)
    slower = {"feedback": {"status": "ok", "speedup": 3.1}, "new_best": False, "best_speedup": 4.01}
    view.add(_record(2, None) | slower)
    assert ": ok 4.01x (best 4.01x" in lines[0]
    assert ": ok 4.32x, within the timing noise of the best (best 4.01x" in lines[1], lines[1]
    assert ": ok 3.10x (best 4.01x" in lines[2]
    assert "│ ok 4.32x ≈" in _render(view, 160)
