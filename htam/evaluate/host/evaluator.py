"""The evaluator: static check -> build -> correctness -> timing -> roofline, with a trusted judge
process and an isolated candidate process per evaluation, and every failure returned as a value
with its cause in one line."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import tempfile
import weakref
from pathlib import Path

from htam.evaluate import footprint, frames, roofline
from htam.evaluate.eval_config import EvalConfig
from htam.evaluate.host import build_stage, folders, integrity, pch, references
from htam.evaluate.host.errors import EvaluatorError
from htam.evaluate.host.forkserver import ForkServer, ForkServerError
from htam.evaluate.host.gpu_queue import GpuQueue
from htam.evaluate.host.references import TIMING_KEYS, Reference
from htam.evaluate.host.static import check_source
from htam.evaluate.host.verdict import add_timing, blame, judge_outcome
from htam.evaluate.host.watchdog import JobOutcome, Limits, run_job
from htam.evaluate.result import EvalResult, truncate
from htam.evaluate.sandbox import isolation
from htam.status import Fault, Status
from htam.tasks.task import Task, TaskError
from htam.vocab import LANGUAGES

MAX_SOLUTION_BYTES = 1 << 20
CGROUP_HEADROOM_MB = 64
DISK_LIMIT_MB = 4096  # what a job directory may hold: its tmpfs's size, and the watchdog's limit


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
        probe = outcome.result
        if not isinstance(probe, frames.Probed) or not probe.device:
            self.close()
            why = probe.error if isinstance(probe, frames.Probed) else None
            raise EvaluatorError(why or f"the probe process failed: {outcome.log}")
        self.device_name: str = probe.device
        self.torch_version: str = probe.torch
        self.arch_list = probe.capability
        self.gpu_total: int = probe.gpu_total
        self.gpu_free: int = probe.gpu_free

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
            env={isolation.PCH_ENV: str(pch.root(self.cache_dir))}
            | ({"TRITON_INTERPRET": "1"} if self.device == "cpu" else {}),
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

    def _env(self) -> dict[str, str]:
        """The variables of every child's job: its caches, and how it compiles here."""
        env = {
            "TORCHINDUCTOR_CACHE_DIR": str(self.cache_dir / "inductor"),
            "TRITON_CACHE_DIR": str(self.cache_dir / "triton"),
        }
        if self.device == "cpu":
            env["TRITON_INTERPRET"] = "1"
        elif self.arch_list and not build_stage.legacy():
            env["TORCH_CUDA_ARCH_LIST"] = self.arch_list
        return env

    def _job(self, kind: str, task: Task | None = None, **extra) -> frames.Job:
        c = self.config
        return frames.Job.model_validate(
            {
                "kind": kind,
                "device": self.device,
                "env": self._env(),
                "size": c.size,
                "seeds": [c.seed + i for i in range(c.trials)],
                "init_seed": c.seed,
                "timing": {k: getattr(c, k) for k in TIMING_KEYS},
                "task_source": task.source if task is not None else None,
                **extra,
            }
        )

    def _run(
        self,
        job: frames.Job,
        candidate: dict | None = None,
        runner: dict | None = None,
        gpu: bool = True,
    ) -> JobOutcome:
        """Run a job; one that uses the device (``gpu``) waits for the device's queue. The
        runners' specs are ``_candidate_spec``'s, changed where a job needs it."""
        workdir = self._workroot / f"judge{next(self._jobs)}"
        held = self.queue.held(job.kind) if gpu else contextlib.nullcontext()
        cand, ref = (None if s is None else frames.CandidateJob(**s) for s in (candidate, runner))
        try:
            with held:
                return run_job(self._server(), job, workdir, self._limits(), cand, ref)
        except ForkServerError:
            self._restart_server()  # the next evaluation gets a working server
            raise
        finally:
            folders.remove(workdir)

    def _trusted(self, job: frames.Job) -> JobOutcome:
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
        if not isinstance(outcome.result, frames.Peaks):
            raise EvaluatorError(f"measuring device peaks failed: {outcome.killed or outcome.log}")
        roofline.store_peaks(self.cache_dir, self.device_name, outcome.result.peaks)
        return outcome.result.peaks

    # ------------------------------------------------------------------ reference

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
        ref = references.load(self, task, timed)
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
        if not _encodable(code):  # a lone surrogate (a JSON escape of half a pair): no source
            result.status = Status.COMPILE_ERROR
            result.messages = ["the solution is not valid Unicode text (a lone surrogate)"]
            return result
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
        try:
            result.log = truncate(outcome.log)
            judge_outcome(result, outcome, self.config)
            blame(
                result,
                outcome,
                ref.nbytes,
                self.gpu_free,
                lambda: references.runs_alone(self, task),
            )
            if outcome.job_dir and result.status is Status.OK:  # a failed build is not reused
                integrity.promote(self.cache_dir, Path(outcome.job_dir), code_digest)
        finally:  # each a tmpfs of its own (DISK_LIMIT_MB), whatever happened above
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
            "env": self._env(),
            "preload": str(preload) if preload else None,
        }

    def prebuild(self, code: str, language: str) -> float:
        """Build what can be built of the code off the device's queue (build_stage.prebuild);
        the seconds it took."""
        return build_stage.prebuild(self, code, language)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        self._cleanup()

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Evaluator", "EvaluatorError", "Reference"]


def _encodable(code: str) -> bool:
    try:
        code.encode()
    except UnicodeEncodeError:
        return False
    return True
