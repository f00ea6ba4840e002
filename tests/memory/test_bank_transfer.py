"""Export, import and merge: versioned JSON, additive statistics, deduplicated evidence."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from htam.memory import FlatMemory, MemoryBank, MemoryBankError, StepRecord, merge
from htam.policy import PolicyConfig
from htam.status import Status

RULE = PolicyConfig()  # the policy's update rule: the bank keeps none

DIRECTIONS = ["memory_access", "fusion", "precision"]
LOCALS = {"memory_access": "memory_access.vectorized_access", "fusion": None,
          "precision": "precision.tensor_core_dot"}  # fmt: skip


def _bank_with(records: list[StepRecord]) -> dict:
    with MemoryBank.in_memory() as bank:
        for record in records:
            bank.record_step(record, config=RULE)
        return bank.export_json()


def _record(run: str, step: int, direction: str, status: Status, reward: float) -> StepRecord:
    prefix = [d for d in DIRECTIONS if d != direction][: step % 3]
    return StepRecord(run, "t", "sig", step, prefix, direction, LOCALS[direction], status,
                      1.0, 1.1, reward, "boom" if status is not Status.OK else "", "")  # fmt: skip


def _stats(export: dict) -> dict:
    """Every statistic of an export, keyed by scope and node or edge id (order-free)."""
    out = {}
    for scope, section in export["scopes"].items():
        for node, stats in section["nodes"].items():
            s = dict(stats)
            s["status_counts"] = {k: v for k, v in s["status_counts"].items() if v}
            out[(scope, node)] = s
        for edge in section["edges"]:
            s = dict(edge["stats"])
            s["status_counts"] = {k: v for k, v in s["status_counts"].items() if v}
            out[(scope, edge["src"], edge["dst"])] = s
    return out


def _approx(a: dict, b: dict, skip: tuple[str, ...] = ()) -> None:
    assert a.keys() == b.keys()
    for key in a:
        for field, value in a[key].items():
            if field in skip:
                continue
            if isinstance(value, float):
                assert value == pytest.approx(b[key][field], abs=1e-9), (key, field)
            else:
                assert value == b[key][field], (key, field)


def test_export_import_round_trip(tmp_path, make_step):
    with MemoryBank.in_memory() as bank:
        bank.record_step(make_step(0, prefix=["precision"], lesson="fused three ops"), config=RULE)
        bank.record_step(
            make_step(1, status=Status.TIMEOUT, reward=-0.8, error="hang"), config=RULE
        )
        FlatMemory(bank).add("fused the chain", make_step(0))
        export = bank.export_json()
    text = json.dumps(export)  # serialisable
    with MemoryBank.import_json(json.loads(text), tmp_path / "copy.db") as copy:
        assert copy.export_json() == export
        assert FlatMemory(copy).retrieve("chain", 1)[0].record.step == 0
    assert export["format"] == "htam-memory-export" and export["version"] == 2


def test_import_refuses_bad_input(tmp_path, bank):
    export = bank.export_json()
    target = tmp_path / "b.db"
    target.write_text("keep me")
    with pytest.raises(MemoryBankError, match="already exists"):
        MemoryBank.import_json(export, target)
    assert target.read_text() == "keep me"
    with pytest.raises(MemoryBankError, match="not an HTAM memory export"):
        MemoryBank.import_json({"format": "something"}, tmp_path / "c.db")
    with pytest.raises(MemoryBankError, match="newer"):
        MemoryBank.import_json({**export, "version": 99}, tmp_path / "d.db")
    assert not (tmp_path / "c.db").exists() and not (tmp_path / "d.db").exists()


def test_merge_adds_disjoint_statistics():
    a = _bank_with([_record("a", i, "fusion", Status.OK, 0.5) for i in range(3)])
    b = _bank_with([_record("b", i, "fusion", Status.INCORRECT, -0.5) for i in range(2)])
    merged = merge(a, b, RULE)
    fusion = merged["scopes"]["cpu"]["nodes"]["fusion"]
    assert (fusion["tries"], fusion["successes"]) == (5, 3)
    assert fusion["reward_sum"] == pytest.approx(0.5)
    assert fusion["status_counts"] == {"ok": 3, "incorrect": 2}
    assert fusion["ema"] == pytest.approx((3 * 0.5 + 2 * -0.5) / 5)
    assert len(merged["steps"]) == 5


def test_merge_counts_shared_history_once():
    shared = [_record("s", i, DIRECTIONS[i % 3], Status.OK, 0.3) for i in range(6)]
    a = _bank_with(shared)
    b = _bank_with(shared + [_record("b", 0, "precision", Status.COMPILE_ERROR, -0.6)])
    _approx(_stats(merge(a, a, RULE)), _stats(a))
    # The EMA of merged banks is a tries-weighted mean (an EMA cannot be un-added): skip it.
    _approx(_stats(merge(a, b, RULE)), _stats(b), skip=("ema",))
    assert len(merge(a, b, RULE)["steps"]) == 7


def test_merge_unions_evidence_without_duplicates_and_stays_bounded(tmp_path):
    a = _bank_with([_record("a", i, "precision", Status.OK, 0.1 * (i + 1)) for i in range(2)])
    b = _bank_with([_record("b", i, "precision", Status.OK, 0.15 * (i + 1)) for i in range(2)])
    merged = merge(a, merge(a, b, RULE), RULE)
    keys = [(e["run_id"], e["step"]) for e in merged["evidence"]]
    assert len(keys) == len(set(keys)) == 3  # evidence_keep positive records
    assert sorted(e["reward"] for e in merged["evidence"]) == pytest.approx([0.15, 0.2, 0.3])
    with MemoryBank.import_json(merged, tmp_path / "m.db") as bank:
        assert bank.local("precision.tensor_core_dot").stats.tries == 4


history = st.lists(
    st.tuples(
        st.sampled_from(["x", "y"]),  # run: both sides may record the same steps
        st.integers(0, 5),
        st.sampled_from(DIRECTIONS),
        st.sampled_from(list(Status)),
        st.floats(-1, 1, allow_nan=False),
    ),
    max_size=12,
)


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(history, history)
def test_merge_is_commutative_on_statistics(steps_a, steps_b):
    def build(steps, side):
        # a step key shared by both sides must carry the same content on both
        records = {}
        for run, i, d, status, r in steps:
            key_run = run if run == "x" else f"{run}{side}"
            records.setdefault((key_run, i), _record(key_run, i, d, status, r))
        return _bank_with(list(records.values()))

    shared: dict[int, tuple] = {}
    for run, i, d, status, r in steps_a:
        if run == "x":
            shared.setdefault(i, (d, status, r))
    steps_b = [
        (run, i, *shared[i]) if run == "x" and i in shared else (run, i, d, status, r)
        for run, i, d, status, r in steps_b
    ]
    a, b = build(steps_a, "a"), build(steps_b, "b")
    ab, ba = merge(a, b, RULE), merge(b, a, RULE)
    assert _stats(ab) == _stats(ba)
    assert ab["steps"] == ba["steps"] and ab["evidence"] == ba["evidence"]
