"""Several processes writing one bank, and a writer killed with SIGKILL mid-update."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from htam.memory import MemoryBank
from htam.policy import PolicyConfig

RULE = PolicyConfig()  # the policy's update rule: the bank keeps none

WRITER = textwrap.dedent(
    """
    import os, sys, time
    from htam.memory import MemoryBank, StepRecord
    from htam.policy import PolicyConfig
    from htam.status import Status
    RULE = PolicyConfig()

    path, worker, count, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    dirs = ["memory_access", "fusion", "parallel_mapping", "precision"]

    def record(run, step):
        prefix = [dirs[(step + k) % 4] for k in range(step % 4)]
        status = Status.OK if step % 3 else Status.INCORRECT
        reward = 0.25 if status is Status.OK else -0.5
        return StepRecord(run, "task", "sig", step, prefix, dirs[step % 4], None, status,
                          None, None, reward)

    while not os.path.exists(go):
        time.sleep(0.005)
    won = 0
    with MemoryBank.open(path) as bank:
        for step in range(count):
            assert bank.record_step(record(worker, step), config=RULE)
            won += bank.record_step(record("shared", step % 10), config=RULE)
    print(won)
    """
)


@pytest.mark.slow
def test_four_writers_lose_nothing(tmp_path):
    path = tmp_path / "bank.db"
    MemoryBank.create(path).close()
    go = tmp_path / "go"
    count, workers = 60, 4
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), f"w{i}", str(count), str(go)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(workers)
    ]
    go.touch()
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * workers
    assert sum(int(out) for out, _ in outputs) == 10  # each shared step won exactly once
    with MemoryBank.open(path) as bank:
        assert bank.step_count() == workers * count + 10
        tries = {d.id: d.stats.tries for d in bank.directions()}
        assert sum(tries.values()) == workers * count + 10
        # each worker: steps 0..59 cycle over 4 directions -> 15 each; shared 0..9 -> 3,3,2,2
        assert tries == {
            "memory_access": 4 * 15 + 3, "fusion": 4 * 15 + 3,
            "parallel_mapping": 4 * 15 + 2, "precision": 4 * 15 + 2,
            "data_reuse": 0, "instruction_throughput": 0, "boundary_handling": 0,
            "occupancy": 0, "launch_overhead": 0,
            "algorithmic_rewrite": 0,
        }  # fmt: skip
        edge_updates = sum(e.stats.count for e in bank.edges())
        expected = workers * sum(s % 4 for s in range(count)) + sum(s % 4 for s in range(10))
        assert edge_updates == expected
        assert bank.connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)


KILLED = textwrap.dedent(
    """
    import sys, time
    from htam.memory import MemoryBank, StepRecord, updates
    from htam.policy import PolicyConfig
    from htam.status import Status
    RULE = PolicyConfig()

    path, pause_at = sys.argv[1], int(sys.argv[2])
    original = updates._update_edge

    def slow_edge(*args):
        # The ledger row, the node statistics and the evidence are written; the edge
        # updates are not. Announce it and wait for the kill inside the open transaction.
        if current == pause_at:
            print("IN_UPDATE", flush=True)
            time.sleep(120)
        original(*args)

    updates._update_edge = slow_edge
    with MemoryBank.open(path) as bank:
        for current in range(10_000):
            record = StepRecord("run", "task", "sig", current, ["fusion"], "precision",
                                "precision.tensor_core_dot", Status.OK, 1.0, 1.2, 0.3)
            bank.record_step(record, config=RULE)
            print("COMMITTED", current, flush=True)
    """
)


def _consistent(bank: MemoryBank) -> int:
    steps = bank.step_count()
    assert bank.connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert bank.direction("precision").stats.tries == steps
    assert bank.local("precision.tensor_core_dot").stats.tries == steps
    assert bank.edge("fusion", "precision").stats.count == steps
    return steps


def test_kill_9_inside_an_update_keeps_every_commit(tmp_path):
    path = tmp_path / "bank.db"
    MemoryBank.create(path).close()
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(path), "25"], stdout=subprocess.PIPE, text=True
    )
    committed = []
    for line in proc.stdout:
        if line.startswith("IN_UPDATE"):
            break
        committed.append(int(line.split()[1]))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL and committed == list(range(25))
    assert (tmp_path / "bank.db-wal").exists()  # the killed writer left its log behind
    with MemoryBank.open(path) as bank:
        assert _consistent(bank) == 25
        assert all(bank.has_step("run", "task", step) for step in committed)
        assert not bank.has_step("run", "task", 25)  # the interrupted update left no trace
        assert len(bank.evidence("precision.tensor_core_dot")) == 3
        assert bank.record_step(_after_kill(), config=RULE)  # the lock died with the writer


@pytest.mark.parametrize("delay", [0.3, 0.7])
def test_kill_9_at_a_random_moment(tmp_path, delay):
    path = tmp_path / "bank.db"
    MemoryBank.create(path).close()
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(path), "-1"], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().startswith("COMMITTED 0")
    time.sleep(delay)
    os.kill(proc.pid, signal.SIGKILL)
    lines = proc.stdout.read().splitlines(keepends=True)
    proc.wait(timeout=30)
    # The kill can cut the last line short ("COMMITTED" without its number): read the complete
    # lines; a cut one is one more committed step.
    cut = bool(lines) and not lines[-1].endswith("\n")
    complete = [line for line in lines if line.endswith("\n")]
    last = int(complete[-1].split()[1]) if complete else 0
    with MemoryBank.open(path) as bank:
        steps = _consistent(bank)
        # committed, maybe killed before it could print (or while printing)
        assert last + 1 + cut <= steps <= last + 2 + cut
        assert steps > 1


def test_foreign_writer_lock_waits_instead_of_failing(tmp_path, make_step):
    path = tmp_path / "bank.db"
    MemoryBank.create(path).close()
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), "late", "1", str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.0)
    assert proc.poll() is None  # waiting on the lock, not failed
    blocker.execute("COMMIT")
    blocker.close()
    assert proc.communicate(timeout=60)[0].strip() == "1"
    with MemoryBank.open(path) as bank:
        assert bank.step_count() == 2


def _after_kill():
    from htam.memory import StepRecord
    from htam.status import Status

    return StepRecord("after", "task", "sig", 0, [], "fusion", None, Status.OK, None, None, 0.1)
