"""The bench's typed records: an attempt's end (units.jsonl) and a unit's result row round-trip
through their dicts, and the attempt log written before they were typed reads back."""

import json
from collections import deque

from htam.bench.bench_config import Unit
from htam.bench.ledger import BenchOutcome, Ledger, UnitRecord, UnitStatus
from htam.bench.metrics import UnitRow
from htam.bench.results import load_log


def test_a_lost_worker_retries_then_fails_and_the_log_reads_back(tmp_path):
    events = []
    outcome = BenchOutcome(planned=1)
    ledger = Ledger(tmp_path, outcome, lambda kind, record: events.append((kind, record)))
    unit = Unit("htam", 0, "level1/19_ReLU", 1, 2)
    pending: deque = deque()
    died = {"worker": 0, "device": "cpu0", "pid": 7, "error": "worker pid 7 died"}
    ledger.lost(unit, 1, died, max_attempts=2, pending=pending)
    assert list(pending) == [(unit, 2)] and outcome.retried == [unit.key]
    pending.popleft()  # the executor hands it to a worker again, which dies too
    ledger.lost(unit, 2, died, max_attempts=2, pending=pending)
    assert outcome.failed == [unit.key] and not pending
    assert [(k, r["status"]) for k, r in events] == [("unit_lost", "retry"), ("unit_lost", "failed")]
    last = load_log(tmp_path)[unit.key]
    assert last == UnitRecord(unit.key, 2, "failed", worker=0, device="cpu0", pid=7,
                              error="worker pid 7 died")  # fmt: skip
    assert not last.done


def test_an_untyped_log_line_reads_and_unknown_keys_are_left_out(tmp_path):
    old = {"unit": "u", "attempt": 1, "worker": 1, "pid": 3, "device": "cpu1", "wall_s": 2.0,
           "status": "done", "best_status": "ok", "best_speedup": 1.5, "someday": True}  # fmt: skip
    (tmp_path / "units.jsonl").write_text(json.dumps(old) + "\n")
    record = load_log(tmp_path)["u"]
    assert record.done and record.status == UnitStatus.DONE and record.best_speedup == 1.5
    assert UnitRecord.from_dict(record.to_dict()) == record


def test_a_unit_row_round_trips():
    row = UnitRow("k", "htam", 0, "t", 1, 6, "complete", correct=True, speedup=2.0, curve=[2.0])
    assert UnitRow.from_dict(json.loads(json.dumps(row.to_dict()))) == row
