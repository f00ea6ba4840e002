"""Which bank each unit gets in each memory mode, and the bench config's refusals."""

import pytest

from htam.bench import BenchConfig, BenchError, Unit
from htam.bench.banks import bank_path, frozen_source, open_bank, prepare_shared
from htam.bench.bench_config import plan_units, unit_done
from htam.bench.runner import write_plan
from htam.memory import MemoryBank, StepRecord
from htam.policy import PolicyConfig
from htam.status import Status
from htam.tasks import Task


def units(*methods, seeds=(0, 1), tasks=("s/a", "s/b")):
    return [Unit(m, s, t, 1, 2) for s in seeds for t in tasks for m in methods]


def record(run_id="r"):
    return StepRecord(run_id=run_id, task_id="s/a", task_signature="relu", step=0, prefix=[],
                      direction="memory_access", local_id=None, status=Status.OK,
                      speedup_before=None, speedup_after=1.5, reward=0.5, error_excerpt="",
                      lesson="scripted")


def test_fresh_banks_are_per_method_and_seed(tmp_path):
    cfg = BenchConfig(out=tmp_path, methods=["htam", "refine"], memory_mode="fresh")
    plan = units("htam", "refine")
    paths = prepare_shared(plan, cfg)
    assert [p.name for p in paths] == ["htam-s0.db", "htam-s1.db"]
    assert bank_path(plan[0], cfg) == tmp_path / "memory" / "htam-s0.db"
    assert bank_path(Unit("refine", 0, "s/a", 1, 2), cfg) is None  # memoryless method


def test_accumulate_copies_the_given_bank_and_never_changes_it(tmp_path):
    source = tmp_path / "given.db"
    with MemoryBank.open(source, create=True) as bank:
        bank.record_step(record("given"), config=PolicyConfig())
    cfg = BenchConfig(out=tmp_path / "out", methods=["htam", "random"], memory=source,
                      memory_mode="accumulate")
    paths = prepare_shared(units("htam", "random"), cfg)
    assert [p.name for p in paths] == ["htam.db", "random.db"]
    with MemoryBank.open(paths[0]) as bank:
        assert bank.step_count() == 1  # starts from the given bank's history
        bank.record_step(record("bench"), config=PolicyConfig())
    with MemoryBank.open(source) as bank:
        assert bank.step_count() == 1
    prepare_shared(units("htam"), cfg)  # a resumed bench keeps what the bank learned
    with MemoryBank.open(paths[0]) as bank:
        assert bank.step_count() == 2


def test_frozen_units_get_a_fresh_private_copy_at_every_start(tmp_path):
    cfg = BenchConfig(out=tmp_path, methods=["htam"], memory_mode="frozen")
    unit = Unit("htam", 0, "s/a", 1, 2)
    assert prepare_shared([unit], cfg) == []
    source = frozen_source(cfg)
    bank = open_bank(unit, cfg, source)
    assert bank.path == tmp_path / "memory" / "frozen" / "htam-s0-s__a.db"
    bank.record_step(record(), config=PolicyConfig())
    assert bank.step_count() == 1
    bank.close()
    with open_bank(unit, cfg, source) as again:
        assert again.step_count() == 0


def test_config_refusals(tmp_path):
    with pytest.raises(ValueError, match="unknown method"):
        BenchConfig(out=tmp_path, methods=["htam", "nope"])
    with pytest.raises(ValueError, match="no effect with --memory-mode fresh"):
        BenchConfig(out=tmp_path, methods=["htam"], memory=tmp_path)
    with pytest.raises(ValueError, match="no memory bank there"):
        BenchConfig(out=tmp_path, methods=["htam"], memory=tmp_path / "x.db", memory_mode="frozen")
    with pytest.raises(ValueError, match="unknown memory mode"):
        BenchConfig(out=tmp_path, methods=["htam"], memory_mode="shared")


def test_plan_order_run_dirs_and_done(tmp_path):
    cfg = BenchConfig(out=tmp_path, methods=["htam", "oneshot"], seeds=2, steps=3)
    tasks = [Task("s/a", "a", "", level=1), Task("s/b", "b", "", level=2)]
    plan = plan_units(tasks, cfg)
    assert [u.key for u in plan[:4]] == ["htam/s0/s/a", "oneshot/s0/s/a", "htam/s0/s/b",
                                         "oneshot/s0/s/b"]
    assert [u.steps for u in plan[:2]] == [3, 1]  # oneshot is one step
    assert plan[0].run_dir(tmp_path) == tmp_path / "runs" / "htam" / "s0" / "s__a"
    run = plan[0].run_dir(tmp_path)
    run.mkdir(parents=True)
    (run / "summary.json").write_text('{"steps": 2}')
    assert not unit_done(plan[0], tmp_path)  # half done
    (run / "summary.json").write_text('{"steps": 3}')
    assert unit_done(plan[0], tmp_path)


def test_resume_must_keep_the_identity(tmp_path):
    from htam.bench.runner import _check_resume

    cfg = BenchConfig(out=tmp_path, methods=["htam"], steps=3)
    write_plan(cfg, [])
    with pytest.raises(BenchError, match="--resume"):
        _check_resume(cfg, resume=False)
    _check_resume(cfg, resume=True)
    other = BenchConfig(out=tmp_path, methods=["htam"], steps=4, language="triton")
    with pytest.raises(BenchError, match="steps, language changed"):
        _check_resume(other, resume=True)


def test_cli_refuses_bad_settings_before_starting_workers(tmp_path):
    from typer.testing import CliRunner

    from htam.cli import app

    base = ["bench", "builtin", "--levels", "1", "--tasks", "1_*", "--target", "cpu",
            "--out", str(tmp_path / "out")]
    runner = CliRunner()
    bad = runner.invoke(app, base + ["--proposer", "tests.bench.helpers:NoSuchProposer"])
    assert bad.exit_code == 2 and "cannot build the proposer" in bad.output
    bad = runner.invoke(app, base + ["--methods", "htam,bogus"])
    assert bad.exit_code == 2 and "unknown method(s) bogus" in bad.output
    bad = runner.invoke(app, base[:4] + ["--tasks", "no_such_task*", "--target", "cpu"])
    assert bad.exit_code == 2 and "no task" in bad.output
    assert not (tmp_path / "out").exists()


def test_report_draws_learned_banks_first_seeds_first(tmp_path):
    from htam.bench.report import memory_banks

    cfg = BenchConfig(out=tmp_path, methods=["htam", "no-prefix", "random", "flat"],
                      memory_mode="fresh")
    prepare_shared(units("htam", "no-prefix", "random", "flat"), cfg)
    for name in ("htam-s0", "no-prefix-s0", "random-s0", "flat-s0", "random-s1"):
        with MemoryBank.open(tmp_path / "memory" / f"{name}.db") as bank:
            bank.record_step(record(), config=PolicyConfig())
    drawn = [p.stem for p in memory_banks(tmp_path)]
    assert drawn == ["flat-s0", "htam-s0", "no-prefix-s0", "random-s0"]  # htam-s1 never learned
