"""The run summary as a typed record: summary.json round-trips through it with its keys in their
order, and the summaries older versions wrote stay readable."""

import json

import pytest

from htam.agent.run_summary import FASTER, NONE_CORRECT, REFERENCE_STANDS, RunSummary
from htam.agent.rundir import RunDir

# A summary.json as the first version of ``htam optimize`` wrote it (commit eb27ea5): no outcome,
# no size, no best_file, and statuses as display texts.
OLDEST = {
    "task_id": "level1/19_ReLU", "method": "htam", "seed": 0, "proposer": "offline",
    "target": "cpu", "language": "cpp", "steps": 2, "steps_planned": 6,
    "best_status": "ok", "best_speedup": 1.32, "best_speedup_vs_compile": None,
    "best_runtime_ms": 0.5, "best_sol_fraction": 0.1, "ref_runtime_ms": 0.66,
    "ref_compile_runtime_ms": None, "timing_meaningful": True, "curve": [1.32, 1.32],
    "statuses": ["ok 1.32x", "compile_error"], "path": [["fusion", "fusion.a"], ["tiling", None]],
    "cost_usd": 0.0, "tokens": {"prompt": 0, "completion": 0}, "calls": 0, "cached_calls": 0,
    "wall_s": 3.5,
}  # fmt: skip


def test_the_oldest_summary_reads_with_what_its_missing_keys_meant():
    s = RunSummary.from_dict(OLDEST)
    assert s.outcome == FASTER and s.correct and s.user_speedup == 1.32
    assert s.statuses == ["ok", "compile_error"]  # bare statuses, as today's
    assert s.best_file == "best.py" and s.stopped_early and s.size is None
    assert s.total_tokens == 0 and s.path[1] == ["tiling", None]


@pytest.mark.parametrize(
    ("status", "speedup", "outcome", "kept"),
    [("ok", 0.8, REFERENCE_STANDS, 1.0), ("incorrect", None, NONE_CORRECT, None)],
)
def test_an_old_summary_without_an_outcome_gets_the_one_it_meant(status, speedup, outcome, kept):
    s = RunSummary.from_dict(OLDEST | {"best_status": status, "best_speedup": speedup})
    assert s.outcome == outcome and s.user_speedup == kept


def test_today_s_summary_round_trips_byte_for_byte(tmp_path):
    s = RunSummary.from_dict(OLDEST | {"outcome": FASTER, "size": "small", "run_dir": "r"})
    run = RunDir(tmp_path)
    run.save_summary(s)
    text = (tmp_path / "summary.json").read_text()
    again = run.summary()
    assert again == s
    assert json.dumps(again.to_dict(), indent=2) == text
    assert list(json.loads(text))[:4] == ["task_id", "method", "seed", "target"]


def test_a_run_directory_without_a_summary_has_none(tmp_path):
    assert RunDir(tmp_path).summary() is None


def test_the_last_failure_of_a_traceback_is_its_exception_not_its_first_line():
    from htam.agent.state import failure_line
    from htam.evaluate.result import EvalResult
    from htam.status import Status

    trace = (
        'Traceback (most recent call last):\n  File "/tmp/job/candidate.py", line 210, in _act\n'
        "    _ext.act(src, out)\nRuntimeError: expected scalar type Float but found Double\n"
    )
    said = failure_line(EvalResult(Status.RUNTIME_ERROR, messages=[trace]))
    assert said == "RuntimeError: expected scalar type Float but found Double"
    build = EvalResult(Status.COMPILE_ERROR, messages=["the build failed: main.cpp line 3\nmore"])
    assert failure_line(build) == "the build failed: main.cpp line 3"
    assert failure_line(EvalResult(Status.TIMEOUT)) == "timeout"
