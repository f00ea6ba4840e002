"""The executor seam without a cluster: the caller's environment is left alone, the core never
imports Ray unless asked, the Ray slots' resources, and the bank owner's snapshot and idempotent
updates (as a plain object: the Ray tests run it as an actor)."""

import os
import sqlite3
import subprocess
import sys

from htam.bench import BenchConfig, run_bench
from htam.bench.bench_config import FIXED_ENV
from htam.memory import MemoryBank
from htam.policy import PolicyConfig
from tests.bench.test_banks import record


def test_run_bench_leaves_the_callers_environment_alone(tmp_path, monkeypatch):
    for name in FIXED_ENV:
        monkeypatch.delenv(name, raising=False)
    before = dict(os.environ)
    outcome = run_bench(BenchConfig(out=tmp_path / "b", methods=["htam"]), [], report=False)
    assert outcome.planned == 0
    assert dict(os.environ) == before


def test_the_local_pool_never_imports_ray(tmp_path):
    code = (
        "import sys\n"
        "from htam.bench import BenchConfig, run_bench\n"
        "from htam.bench.executor import executor_for\n"
        "import htam.bench.executor_local, htam.cli.bench_cmd, htam.cli.optimize_cmd\n"
        f"run_bench(BenchConfig(out={str(tmp_path / 'b')!r}, methods=['htam']), [], report=False)\n"
        "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_ray_slots_hold_one_gpu_or_one_cpu():
    from htam.bench.executor_ray import slot_count, slot_options

    cuda = BenchConfig(out="x", methods=["htam"], target="cuda", language="triton", ray="auto")
    cpu = BenchConfig(out="x", methods=["htam"], target="cpu", ray="auto")
    assert slot_options(cuda)["num_gpus"] == 1 and slot_options(cuda)["num_cpus"] == 0
    assert slot_options(cpu)["num_cpus"] == 1 and "num_gpus" not in slot_options(cpu)
    for options in (slot_options(cuda), slot_options(cpu)):
        assert options["max_restarts"] == 0 and options["max_task_retries"] == 0
        assert options["runtime_env"]["env_vars"]["NCCL_NVLS_ENABLE"] == "0"
    resources = {"CPU": 6.0, "GPU": 4.0}
    assert slot_count(cuda, resources) == 4 and slot_count(cpu, resources) == 6
    assert slot_count(cuda, {"CPU": 8.0}) == 0
    fixed = BenchConfig(out="x", methods=["htam"], ray="auto", ray_slots=3)
    assert slot_count(fixed, resources) == 3


def test_bank_owner_snapshots_and_applies_each_step_once(tmp_path):
    from htam.bench.ray_bank import BankOwner

    path = tmp_path / "htam.db"
    MemoryBank.create(path).close()
    owner = BankOwner([str(path)])
    rule = PolicyConfig()  # the policy's update rule: the bank keeps none
    assert owner.record_step(str(path), record("r1"), None, rule) is True
    assert owner.record_step(str(path), record("r1"), None, rule) is False  # replayed: ignored
    assert owner.record_step(str(path), record("r2"), None, rule) is True
    row = ("cpu", "r1", "s/a", 0, "text", "{}", 1.0)
    assert owner.add_flat(str(path), [row, row]) == 1
    image = owner.snapshot(str(path))
    copy = sqlite3.connect(":memory:")
    copy.deserialize(image)
    assert copy.execute("SELECT count(*) FROM steps").fetchone()[0] == 2
    assert copy.execute("SELECT count(*) FROM flat_experiences").fetchone()[0] == 1
    assert owner.step_count(str(path)) == 2
    owner.close()
    with MemoryBank.open(path) as bank:  # on disk, as the owner left it
        assert bank.step_count() == 2


def test_each_executor_is_chosen_by_name_and_runs_through_the_protocol(tmp_path):
    from collections import deque

    from htam.bench.executor import EXECUTORS, executor_for
    from htam.bench.executor_local import LocalPool
    from htam.bench.ledger import BenchOutcome, Ledger

    assert set(EXECUTORS) == {"local", "ray"}
    config = BenchConfig(out=tmp_path, methods=["htam"])
    assert config.executor == "local"
    assert BenchConfig(out=tmp_path, methods=["htam"], ray="auto").executor == "ray"
    ledger = Ledger(tmp_path, BenchOutcome(planned=0), lambda *_: None)
    pool = executor_for(config, {}, deque(), ledger)
    assert isinstance(pool, LocalPool)  # mypy checks that each pool satisfies ``Executor``
