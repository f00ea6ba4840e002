"""The evaluator: static check -> build -> correctness -> timing -> roofline, with a trusted judge
process and an isolated candidate process per evaluation, and every failure returned as a value
with its cause in one line."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import tempfile
import weakref
from dataclasses import asdict, dataclass, field
from pathlib import Path

from htam.evaluate import footprint, roofline
from htam.evaluate.eval_config import EvalConfig
from htam.evaluate.host import build_stage, folders, integrity
from htam.evaluate.host.forkserver import ForkServer, ForkServerError
from htam.evaluate.host.gpu_queue import GpuQueue
from htam.evaluate.host.static import check_source
from htam.evaluate.host.verdict import EVALUATOR_FAILED, add_timing, judge_outcome
from htam.evaluate.host.watchdog import JobOutcome, Limits, run_job
from htam.evaluate.result import EvalResult, truncate
from htam.evaluate.sandbox import isolation
from htam.status import EVALUATOR_GPU_MEMORY, Fault, Status
from htam.tasks.task import Task, TaskError
from htam.vocab import LANGUAGES

# What a reference job checks, in its cached results' names: a change of the rules is a new
# name (2: outputs a candidate cannot be judged against, trusted_jobs.unjudgeable).
REFERENCE_RULES = 2
_TIMING_KEYS = ("warmup_ms", "timing_budget_ms", "min_timed", "max_timed", "l2_flush_mb")
MAX_SOLUTION_BYTES = 1 << 20
CGROUP_HEADROOM_MB = 64
DISK_LIMIT_MB = 4096  # what a job directory may hold: its tmpfs's size, and the watchdog's limit


class EvaluatorError(Exception):
    """The evaluator itself cannot work (no device, a broken reference): not the candidate's fault."""


@dataclass
class Reference:
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
        isolation.not_dumpable()  # no /proc/<pid>/mem or environ of this process for candidates
        self._workroot = Path(tempfile.mkdtemp(prefix="htam-eval-"))
        self._cleanup = weakref.finalize(self, folders.remove, self._workroot)
        self._jobs = itertools.count(1)
        self._references: dict[str, Reference] = {}
        self.queue = GpuQueue(self.cache_dir, self.device)
        # code for this device's architecture only ("9.0" on Hopper), known once probed
        self.arch_list: str | None = None
        self.server: ForkServer | None = None
        try:
            self._start_server()
            outcome = self._trusted(self._job("probe"))
        except BaseException:  # Ctrl-C while it starts: the server goes before its folder
            self.close()
            raise
        probe = outcome.result or {}
        if "device" not in probe:
            self.close()
            raise EvaluatorError(probe.get("error") or f"the probe process failed: {outcome.log}")
        self.device_name: str = probe["device"]
        self.torch_version: str = probe["torch"]
        self.arch_list = probe.get("capability")
        self.gpu_total: int = probe.get("gpu_total", 0)
        self.gpu_free: int = probe.get("gpu_free", 0)

    @property
    def isolation(self) -> str:
        """One line: which protections candidates run under here, and which are missing."""
        return self._server().plan.summary

    def _server(self) -> ForkServer:
        if self.server is None:
            raise EvaluatorError("the evaluator is closed")
        return self.server

    def _start_server(self) -> None:
        # Triton decides at import whether its library functions are interpreted, so the server
        # that preloads Triton must already see the variable.
        self.server = ForkServer(
            self._workroot,
            env={"TRITON_INTERPRET": "1"} if self.device == "cpu" else None,
            warm_cuda=self.device == "cuda",
            limits=isolation.Limits(
                address_space_bytes=None if self.device == "cuda" else self.config.address_space(),
                memfd=self.device == "cuda",
                # the watchdog's limit, with room for the page cache of what it reads (the
                # compiler, headers), which the kernel counts and reclaims first
                memory_bytes=(self.config.memory_limit() + CGROUP_HEADROOM_MB) << 20,
                disk_bytes=DISK_LIMIT_MB << 20,
            ),
        )

    def _restart_server(self) -> None:
        if self.server is not None:
            self.server.close()
        # The new server numbers its candidates' folders from job1 again: the dead one's stay
        # behind and made every later start fail (FileExistsError), so that every later
        # evaluation was lost too. Its children died with it: nothing uses them.
        for stale in self._workroot.glob("job*"):
            folders.remove(stale)
        self._start_server()

    # ------------------------------------------------------------------ plumbing

    def _limits(self) -> Limits:
        c = self.config
        return Limits(
            c.compile_timeout_s,
            c.run_timeout_s,
            c.memory_limit(),
            c.output_limit_bytes,
            DISK_LIMIT_MB,
        )

    def _job(self, kind: str, task: Task | None = None, **extra) -> dict:
        c = self.config
        env = {
            "TORCHINDUCTOR_CACHE_DIR": str(self.cache_dir / "inductor"),
            "TRITON_CACHE_DIR": str(self.cache_dir / "triton"),
        }
        if self.device == "cpu":
            env["TRITON_INTERPRET"] = "1"
        elif self.arch_list and not build_stage.legacy():
            env["TORCH_CUDA_ARCH_LIST"] = self.arch_list
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

    def _run(
        self,
        job: dict,
        candidate: dict | None = None,
        runner: dict | None = None,
        gpu: bool = True,
    ) -> JobOutcome:
        """Run a job; one that uses the device (``gpu``) waits for the device's queue."""
        workdir = self._workroot / f"judge{next(self._jobs)}"
        held = self.queue.held(job["kind"]) if gpu else contextlib.nullcontext()
        try:
            with held:
                return run_job(self._server(), job, workdir, self._limits(), candidate, runner)
        except ForkServerError:
            self._restart_server()  # the next evaluation gets a working server
            raise
        finally:
            folders.remove(workdir)

    def _trusted(self, job: dict) -> JobOutcome:
        try:
            return self._run(job)
        except ForkServerError as exc:
            raise EvaluatorError(str(exc)) from None

    # ------------------------------------------------------------------ device peaks

    def peaks(self) -> dict:
        cached = roofline.load_peaks(self.cache_dir, self.device_name)
        if cached:
            return cached
        outcome = self._trusted(self._job("peaks"))
        if not outcome.result or "peaks" not in outcome.result:
            raise EvaluatorError(f"measuring device peaks failed: {outcome.killed or outcome.log}")
        roofline.store_peaks(self.cache_dir, self.device_name, outcome.result["peaks"])
        return outcome.result["peaks"]

    # ------------------------------------------------------------------ reference

    def _time_compile(self) -> bool:
        wanted = self.config.time_compile_reference
        return self.device == "cuda" if wanted is None else wanted

    def _reference_file(self, task: Task) -> Path:
        c = self.config
        key = (
            f"{REFERENCE_RULES}|{task.digest}|{c.size}|{self.device_name}|{self.torch_version}|{c.seed}|{c.trials}"
            f"|{'compile' if self._time_compile() else 'eager'}"
            # the alone time is set against the paired one (reference_drift): same settings
            + "".join(f"|{getattr(c, k)}" for k in _TIMING_KEYS)
        )
        name = f"{task.id.replace('/', '_')}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"
        return self.cache_dir / "reference" / name

    def reference(self, task: Task, timed: bool = True) -> Reference:
        """Cost and (when ``timed``) eager and torch.compile times of the reference. Untimed is
        for runs that will evaluate no candidate. Raises TaskError with a one-line cause, a
        task too big to judge on this card included (before any candidate runs)."""
        ref = self._reference(task, timed)
        if timed and (why := footprint.too_big(ref.nbytes, self.gpu_total)):
            raise TaskError(task.id, why)
        return ref

    def _reference(self, task: Task, timed: bool) -> Reference:
        if task.digest in self._references:
            ref = self._references[task.digest]
            if ref.timing is not None or not timed:
                return ref
        path = self._reference_file(task)
        cached = integrity.read_sealed(self.cache_dir, path)
        if cached is not None:
            ref = Reference(**cached)
            self._references[task.digest] = ref
            return ref
        compile_too = timed and self._time_compile()
        if compile_too and self.device == "cuda":
            self._warm(task)
        job = self._job("reference", task, time=timed, time_compile=compile_too)
        outcome = self._trusted(job)
        frames = {f.get("type"): f for f in outcome.frames}
        res = frames.get("result")
        if outcome.killed or res is None or res.get("status") != "ok":
            raise TaskError(task.id, f"the reference failed to run: {_reference_cause(outcome)}")
        cost = frames["cost"]
        ref = Reference(cost["flops"], cost["bytes"], cost["dtypes"])
        if timed:
            ref.timing, ref.compile_timing = res["timing"], res.get("compile_timing")
            ref.messages = [res["message"]] if res.get("message") else []
            integrity.write_sealed(self.cache_dir, path, asdict(ref))
        self._references[task.digest] = ref
        return ref

    def _warm(self, task: Task) -> None:
        """Compile the reference off the device's queue (trusted_jobs._warm); its failure only
        leaves the compile to the timed job (a lost server was restarted by _run)."""
        with contextlib.suppress(ForkServerError):
            self._run(self._job("warm", task), gpu=False)

    # ------------------------------------------------------------------ candidates

    def evaluate(
        self, task: Task, code: str, language: str, allow_torch: bool | None = None
    ) -> EvalResult:
        if language not in LANGUAGES[self.target]:
            raise ValueError(f"language {language!r} does not run on target {self.target}")
        allow = self.config.allow_torch if allow_torch is None else allow_torch
        result = EvalResult(
            Status.OK,
            device=self.device_name,
            target=self.target,
            language=language,
            isolation=self.isolation,
        )
        if len(code.encode()) > MAX_SOLUTION_BYTES:
            result.status = Status.REJECTED
            result.messages = [
                f"the solution is {len(code.encode())} bytes; at most {MAX_SOLUTION_BYTES} allowed"
            ]
            return result
        violations = check_source(code, language, allow_torch=allow)
        if violations:
            syntax = any(v.rule == "syntax" for v in violations)
            result.status = Status.COMPILE_ERROR if syntax else Status.REJECTED
            result.messages = [str(v) for v in violations]
            return result
        build_s = self.prebuild(code, language)
        ref = self.reference(task)
        code_digest = hashlib.sha256(f"{language}\0{code}".encode()).hexdigest()[:32]
        preload = integrity.verified(self.cache_dir, code_digest) or build_stage.prebuilt(
            self, code, language
        )
        candidate = self._candidate_spec(code, language, preload)
        job = self._job(
            "judge",
            task,
            meaningful=not (self.device == "cpu" and language == "triton"),
            memory_limit_mb=self.config.memory_limit(),
            kernel_required=not allow,
            **self.config.judge_settings(),
        )
        # The reference runs in a process isolated exactly like the candidate's, through the
        # same harness: the two are timed alike, and the reference never shares a process with
        # the candidate.
        runner = {
            **candidate,
            "code": f"{task.source}\n\nModelNew = Model\n",
            "preload": None,
            "hold_outputs": False,
        }
        try:
            outcome = self._run(job, candidate, runner)
            self.queue.candidate(task.id, language, build_s, outcome, preload is not None)
        except ForkServerError as exc:
            # the evaluator's fault, not the candidate's: never a verdict (never learned, never
            # cached); the loop evaluates it again on the new server
            result.status, result.fault = Status.LOST, Fault.EVALUATOR
            result.messages = [f"{exc}; it was replaced, and this evaluation is lost (rerun it)"]
            return result
        result.log = truncate(outcome.log)
        judge_outcome(result, outcome, self.config)
        # The reference's host memory beside a candidate is the judge's and its runner's alone
        # (the slots it lends the candidate included): a candidate cannot raise it, and the
        # task cannot be judged at this limit (every candidate of Robust-KBench's
        # llama_rmsnorm blamed on the CPU). Anything else the reference met beside the candidate
        # but not alone (GPU memory) is the candidate's doing.
        host_memory = outcome.kill_kind == "reference"
        cause = result.messages[0].removeprefix(f"{EVALUATOR_FAILED}: ") if result.messages else ""
        if (
            (result.infrastructure or result.status is Status.RUNTIME_ERROR)
            and footprint.is_gpu_oom(cause)
            and footprint.crowds(ref.nbytes, self.gpu_free)
        ):
            # the evaluation's own share of the card explains it (the reference's runner or the
            # candidate ran out of it): not the candidate's fault, and nothing to learn
            result.status = Status.RUNTIME_ERROR
            why = footprint.crowded_cause(ref.nbytes, self.gpu_free, cause)
            result.messages = [f"{EVALUATOR_GPU_MEMORY}: {why}"]
            result.fault = Fault.EVALUATOR
        elif result.infrastructure and not host_memory and self._reference_runs_alone(task):
            # the only difference was the candidate beside it (a candidate holding
            # the GPU's memory made the reference's runner fail and stopped the run)
            result.infrastructure = False
            result.messages = [
                f"the reference failed beside this candidate ({cause}) but runs alone: the "
                "candidate's use of shared resources (GPU memory, the machine's) is blamed"
            ]
        if outcome.job_dir and result.status is Status.OK:  # a failed build is not reused
            integrity.promote(self.cache_dir, Path(outcome.job_dir), code_digest)
        for folder in (outcome.job_dir, outcome.runner_dir):
            if folder:
                folders.remove(folder)
        if result.status is Status.OK:
            add_timing(result, outcome, ref, self.config, self.peaks(), self.device)
        return result

    def _candidate_spec(self, code: str, language: str, preload: Path | None) -> dict:
        return {
            "code": code,
            "language": language,
            "device": self.device,
            "l2_flush_mb": self.config.l2_flush_mb,
            "env": self._job("x")["env"],
            "preload": str(preload) if preload else None,
        }

    def prebuild(self, code: str, language: str) -> float:
        """Build what can be built of the code off the device's queue (build_stage.prebuild);
        the seconds it took."""
        return build_stage.prebuild(self, code, language)

    def _reference_runs_alone(self, task: Task) -> bool:
        """Whether the reference, untimed in a job of its own, runs to a result."""
        try:
            outcome = self._trusted(self._job("reference", task, time=False, time_compile=False))
        except EvaluatorError:
            return False
        res = outcome.result
        return not outcome.killed and res is not None and res.get("status") == "ok"

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        self._cleanup()

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _reference_cause(outcome: JobOutcome) -> str:
    if outcome.killed:
        return outcome.killed
    res = outcome.result
    if res is not None and res.get("message"):
        return res["message"]
    lines = [line for line in outcome.judge_log.strip().splitlines() if line.strip()]
    last = lines[-1].strip() if lines else "no output"
    return f"its process ended without a result ({last})"


__all__ = ["Evaluator", "EvaluatorError", "Reference"]
