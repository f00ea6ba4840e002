"""A bench worker as a Ray actor: one per GPU (``num_gpus=1``, Ray sets its
``CUDA_VISIBLE_DEVICES``) or CPU slot, holding one evaluator and one proposer like a local worker
and running one unit at a time.

Run directories are written straight into ``OUT``, which must be a path every node sees (the
same path on each: a shared filesystem); ``ready`` says so when it is not. Shared banks are
reached through the ``BankOwner`` actor (htam.bench.ray_bank); frozen-mode copies and bank
snapshots live in the actor's node-local scratch directory.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from htam.bench.bench_config import FIXED_ENV, BenchConfig, Unit
from htam.bench.ledger import UnitRecord


class UnitWorker:
    def __init__(self, slot: int, config: BenchConfig, owner, frozen_data: dict | None):
        os.environ.update(FIXED_ENV)
        self.slot, self.config, self.owner, self.frozen_data = slot, config, owner, frozen_data
        self.scratch = Path(tempfile.mkdtemp(prefix=f"htam-ray-w{slot}-"))
        self.fatal: str | None = None
        self.evaluator: Any = None  # an Evaluator once started (imported in the actor only)
        self.proposer: Any = None
        self.info: dict[str, Any] = {}
        self._start()

    def _start(self) -> None:
        import ray

        from htam.evaluate import EvalConfig, Evaluator, EvaluatorError
        from htam.llm.errors import LLMError

        context = ray.get_runtime_context()
        node = context.get_node_id()
        if self.config.target == "cuda":
            device = f"ray:{node[:8]}:cuda:{','.join(map(str, ray.get_gpu_ids()))}"
        else:
            device = f"ray:{node[:8]}:cpu{self.slot}"
        self.info = {
            "worker": self.slot,
            "pid": os.getpid(),
            "node": node,
            "device": device,
            "ip": ray.util.get_node_ip_address(),
        }
        if not (self.config.out / "plan.json").exists():
            self.fatal = (
                f"{self.config.out} is not visible on node {node[:8]} "
                f"({self.info['ip']}): --out must be a path every node shares"
            )
            return
        try:
            self.evaluator = Evaluator(
                self.config.target, EvalConfig(size=self.config.size, **self.config.eval_overrides)
            )
        except EvaluatorError as exc:
            self.fatal = f"the evaluator on {device} cannot start: {exc}"
            return
        try:
            self.proposer = self.config.proposer.build(self.config.target, self.config.language)
        except (ImportError, AttributeError, TypeError, ValueError, LLMError) as exc:
            self.fatal = f"cannot build the proposer: {exc}"

    def ready(self) -> dict[str, Any]:
        """Who this worker is, with ``fatal`` set when it cannot run units."""
        device_name = self.evaluator.device_name if self.evaluator is not None else None
        return {**self.info, "fatal": self.fatal, "device_name": device_name}

    def _bank(self, unit: Unit):
        from htam.bench.banks import bank_path
        from htam.bench.ray_bank import SharedBank
        from htam.memory import MemoryBank

        path = bank_path(unit, self.config)
        if path is None:
            return None
        if self.config.memory_mode == "frozen":
            local = self.scratch / "frozen" / path.name
            for suffix in ("", "-wal", "-shm"):
                Path(f"{local}{suffix}").unlink(missing_ok=True)
            local.parent.mkdir(parents=True, exist_ok=True)
            return MemoryBank.create(local, self.frozen_data)
        return SharedBank.from_owner(self.owner, str(path), self.scratch / "snapshots")

    def run(self, unit: Unit, task, attempt: int) -> UnitRecord:
        from htam.bench.local_worker import _write_status, run_unit

        out = self.config.out
        status = {
            "slot": self.slot,
            "pid": self.info["pid"],
            "device": self.info["device"],
            "node": self.info["node"],
        }
        _write_status(out, self.slot, {**status, "unit": unit.key, "attempt": attempt})
        record = run_unit(
            unit, task, attempt, self.config, self.evaluator, self.proposer, self._bank
        )
        record.worker, record.pid = self.slot, self.info["pid"]
        record.device, record.node = self.info["device"], self.info["node"]
        record.device_name = self.evaluator.device_name if self.evaluator else None
        _write_status(out, self.slot, {**status, "unit": None})
        return record

    def close(self) -> None:
        if self.evaluator is not None:
            self.evaluator.close()
            self.evaluator = None
        shutil.rmtree(self.scratch, ignore_errors=True)
