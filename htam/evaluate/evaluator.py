"""The evaluator: static check -> build -> correctness -> timing -> roofline, one isolated child
process per candidate, every failure returned as a value."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from htam.evaluate import roofline
from htam.evaluate.compare import compare_outputs
from htam.evaluate.config import EvalConfig
from htam.evaluate.forkserver import ForkServer
from htam.evaluate.result import EvalResult, Timing, truncate
from htam.evaluate.sandbox import JobOutcome, Limits, run_job
from htam.evaluate.static import check_source
from htam.status import Status
from htam.tasks.task import Task, TaskError

LANGUAGES = {"cuda": ("cuda", "triton"), "cpu": ("cpp", "triton")}
_TIMING_KEYS = ("warmup_ms", "timing_budget_ms", "min_timed", "max_timed", "l2_flush_mb")


class EvaluatorError(Exception):
    """The evaluator itself cannot work (no device, a broken reference): not the candidate's fault."""


@dataclass
class Reference:
    outputs: list
    flops: int
    nbytes: int
    dtypes: list[str]
    timing: dict | None = None
    compile_timing: dict | None = None
    messages: list[str] = field(default_factory=list)


class Evaluator:
    def __init__(self, target: str = "cpu", config: EvalConfig | None = None):
        if target not in LANGUAGES:
            raise ValueError(f"unknown target {target!r}; choose cuda or cpu")
        self.target = target
        self.device = "cuda" if target == "cuda" else "cpu"
        self.config = config or EvalConfig()
        self.cache_dir = Path(self.config.cache_dir)
        self._workroot = Path(tempfile.mkdtemp(prefix="htam-eval-"))
        self._jobs = 0
        self._references: dict[str, Reference] = {}  # timed
        self._untimed: dict[str, Reference] = {}
        # Triton decides at import whether its own library functions (tl.sigmoid, tl.zeros, ...)
        # are interpreted, so the server that preloads Triton must already see the variable.
        self.server = ForkServer(
            env={"TRITON_INTERPRET": "1"} if self.device == "cpu" else None,
            warm_cuda=self.device == "cuda",
        )
        outcome = self._run(self._job("probe"))
        probe = outcome.result or {}
        if "device" not in probe:
            self.close()
            raise EvaluatorError(probe.get("error") or f"the probe process failed:\n{outcome.log}")
        self.device_name: str = probe["device"]
        self.torch_version: str = probe["torch"]

    # ------------------------------------------------------------------ plumbing

    def _limits(self) -> Limits:
        c = self.config
        return Limits(c.compile_timeout_s, c.run_timeout_s, c.memory_limit_mb, c.output_limit_bytes)

    def _job(self, kind: str, task: Task | None = None, **extra) -> dict:
        c = self.config
        env = {
            "TORCHINDUCTOR_CACHE_DIR": str(self.cache_dir / "inductor"),
            "TRITON_CACHE_DIR": str(self.cache_dir / "triton"),
        }
        if self.device == "cpu":
            env["TRITON_INTERPRET"] = "1"
        job = {
            "kind": kind,
            "device": self.device,
            "env": env,
            "size": c.size,
            "seeds": [c.seed + i for i in range(c.trials)],
            "init_seed": c.seed,
            "timing": {k: getattr(c, k) for k in _TIMING_KEYS},
        }
        if task is not None:
            job["task_source"] = task.source
        job.update(extra)
        return job

    def _run(self, job: dict, on_frame=None) -> JobOutcome:
        self._jobs += 1
        workdir = self._workroot / f"job{self._jobs}"
        try:
            return run_job(self.server, job, workdir, self._limits(), on_frame)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    # ------------------------------------------------------------------ device peaks

    def peaks(self) -> dict:
        cached = roofline.load_peaks(self.cache_dir, self.device_name)
        if cached:
            return cached
        outcome = self._run(self._job("peaks"))
        if not outcome.result or "peaks" not in outcome.result:
            raise EvaluatorError(f"measuring device peaks failed:\n{truncate(outcome.log)}")
        roofline.store_peaks(self.cache_dir, self.device_name, outcome.result["peaks"])
        return outcome.result["peaks"]

    # ------------------------------------------------------------------ reference

    def _time_compile(self) -> bool:
        wanted = self.config.time_compile_reference
        return self.device == "cuda" if wanted is None else wanted

    def _reference_file(self, task: Task) -> Path:
        c = self.config
        key = (
            f"{task.digest}|{c.size}|{self.device_name}|{self.torch_version}|{c.seed}|{c.trials}"
            f"|{'compile' if self._time_compile() else 'eager'}"
        )
        name = f"{task.id.replace('/', '_')}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"
        return self.cache_dir / "reference" / name

    def reference(self, task: Task, timed: bool = True) -> Reference:
        """Outputs, cost and (when ``timed``) eager and torch.compile times of the reference.
        Untimed is for runs that will evaluate no candidate: it skips the timing and compile."""
        if task.digest in self._references:
            return self._references[task.digest]
        if not timed and task.digest in self._untimed:
            return self._untimed[task.digest]
        path = self._reference_file(task)
        cached = json.loads(path.read_text()) if path.exists() else None
        job = self._job(
            "reference",
            task,
            time=timed and cached is None,
            time_compile=timed and self._time_compile(),
        )
        outcome = self._run(job)
        frames = {f.get("type"): f for f in outcome.frames}
        if "outputs" not in frames or "result" not in frames:
            raise TaskError(task.id, f"the reference failed to run:\n{truncate(outcome.log, 2000)}")
        out, res = frames["outputs"], frames["result"]
        ref = Reference(out["outputs"], out["flops"], out["bytes"], out["dtypes"])
        if cached:
            ref.timing, ref.compile_timing = cached["timing"], cached["compile_timing"]
            ref.messages = cached["messages"]
        elif not timed:
            self._untimed[task.digest] = ref
            return ref
        else:
            ref.timing, ref.compile_timing = res["timing"], res.get("compile_timing")
            ref.messages = [res["message"]] if res.get("message") else []
            path.parent.mkdir(parents=True, exist_ok=True)
            data = {k: v for k, v in asdict(ref).items() if k != "outputs"}
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(data, indent=2))
            tmp.replace(path)
        self._references[task.digest] = ref
        return ref

    # ------------------------------------------------------------------ candidates

    def evaluate(
        self, task: Task, code: str, language: str, allow_torch: bool | None = None
    ) -> EvalResult:
        if language not in LANGUAGES[self.target]:
            raise ValueError(f"language {language!r} does not run on target {self.target}")
        allow = self.config.allow_torch if allow_torch is None else allow_torch
        result = EvalResult(
            Status.OK, device=self.device_name, target=self.target, language=language
        )
        violations = check_source(code, language, allow_torch=allow)
        if violations:
            syntax = any(v.rule == "syntax" for v in violations)
            result.status = Status.COMPILE_ERROR if syntax else Status.REJECTED
            result.messages = [str(v) for v in violations]
            return result
        ref = self.reference(task)
        verdict: dict = {}

        def on_frame(frame: dict) -> bool:
            if frame.get("type") == "outputs":
                verdict["mismatch"] = compare_outputs(
                    frame["outputs"], ref.outputs, self.config.tolerances
                )
                return verdict["mismatch"] is not None
            return False

        meaningful = not (self.device == "cpu" and language == "triton")
        job = self._job(
            "candidate",
            task,
            code=code,
            language=language,
            meaningful=meaningful,
            extension_dir=str(self.cache_dir / "extensions"),
        )
        outcome = self._run(job, on_frame)
        result.log = truncate(outcome.log)
        self._judge(result, outcome, verdict.get("mismatch"))
        if result.status is Status.OK:
            self._timing(result, outcome, ref)
        return result

    def _judge(self, result: EvalResult, outcome: JobOutcome, mismatch: str | None) -> None:
        res = outcome.result
        c = self.config
        if mismatch:
            result.status, result.messages = Status.INCORRECT, [mismatch]
        elif outcome.killed == "timeout":
            result.status = Status.TIMEOUT
            result.messages = [
                f"killed after the time limit (build {c.compile_timeout_s:.0f} s, run {c.run_timeout_s:.0f} s)"
            ]
        elif outcome.killed == "memory":
            result.status = Status.RUNTIME_ERROR
            result.messages = [f"killed: host memory above {c.memory_limit_mb} MB"]
        elif outcome.killed == "output":
            result.status = Status.RUNTIME_ERROR
            result.messages = [f"killed: output flood above {c.output_limit_bytes} bytes"]
        elif outcome.channel_error:
            result.status, result.messages = (
                Status.REJECTED,
                [f"result channel tampered: {outcome.channel_error}"],
            )
        elif res is None:
            code = outcome.exit_code
            why = (
                f"killed by signal {-code}"
                if code is not None and code < 0
                else f"exit code {code}"
            )
            result.status, result.messages = (
                Status.RUNTIME_ERROR,
                [f"the process ended without a verdict ({why})"],
            )
        elif res["status"] != "ok":
            result.status, result.messages = Status(res["status"]), [res["message"]]

    def _timing(self, result: EvalResult, outcome: JobOutcome, ref: Reference) -> None:
        frames = {f.get("type"): f for f in outcome.frames}
        res, stage, outs = frames["result"], frames.get("stage", {}), frames.get("outputs", {})
        t = res["timing"]
        result.timing = Timing(**{k: t[k] for k in Timing.__dataclass_fields__})
        result.runtime_ms = t["median_ms"]
        # Speedups divide times measured side by side in the candidate's process; the cached
        # reference time (its own process, earlier) is the fallback.
        paired = res.get("paired_reference")
        if paired:
            result.ref_runtime_ms = paired["median_ms"]
        elif ref.timing:
            result.ref_runtime_ms = ref.timing["median_ms"]
        if ref.compile_timing and ref.timing:
            # torch.compile's time, carried onto this process's clock by the eager/compiled ratio
            # that the reference's process measured side by side.
            compile_ratio = ref.compile_timing["median_ms"] / ref.timing["median_ms"]
            result.ref_compile_runtime_ms = result.ref_runtime_ms * compile_ratio
        after = t.get("after_end_ms")
        c = self.config
        if after is not None and after > c.escape_ratio * t["median_ms"] + c.escape_slack_ms:
            result.status = Status.REJECTED
            result.messages.append(
                f"work escaped the timed stream: {after:.3f} ms of device work after the end "
                f"event, {t['median_ms']:.3f} ms inside the events"
            )
            return
        compile_s = res.get("compile_s", 0.0) + (outs.get("first_call_s") or 0.0)
        result.breakdown_s = {
            "wall": outcome.wall_s,
            "compile_and_first_call": compile_s,
            "import": stage.get("import_s", 0.0),
            "timed_trials": t["elapsed_s"],
            "overhead": outcome.wall_s - compile_s - t["elapsed_s"],
            **_overhead_parts(outcome, res.get("marks"), compile_s),
        }
        if not result.timing.meaningful:
            result.messages.append("timings under the Triton interpreter are not meaningful")
        bound = roofline.lower_bound(ref.flops, ref.nbytes, ref.dtypes, self.peaks())
        result.sol_fraction, result.bound = bound.time_ms / result.runtime_ms, bound.kind
        if result.speedup and result.speedup > c.flag_speedup and result.timing.meaningful:
            result.flags.append(
                f"speedup {result.speedup:.1f}x is above {c.flag_speedup:.0f}x: check it by hand"
            )

    def close(self) -> None:
        self.server.close()
        shutil.rmtree(self._workroot, ignore_errors=True)

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _overhead_parts(outcome: JobOutcome, marks: dict | None, compile_s: float) -> dict:
    """Where the overhead went, from the child's clock marks laid on the parent's timeline."""
    if not marks or outcome.result_at is None:
        return {}
    return {
        "process_start": marks["entered"] - outcome.started,
        "device_init": marks["device_ready"] - marks["entered"],
        "import_and_correctness": marks["trials_done"] - marks["device_ready"] - compile_s,
        "send_outputs": marks["outputs_sent"] - marks["trials_done"],
        "reference_build": marks["reference_built"] - marks["outputs_sent"],
        "result_and_exit": outcome.started + outcome.wall_s - marks["timed"],
    }


__all__ = ["Evaluator", "EvaluatorError", "Reference"]
