"""The settings of one optimization run (method, steps, seed, target, language) and how the loop
reacts to repeats and to a failing endpoint."""

from __future__ import annotations

from dataclasses import dataclass

from htam.vocab import method_spec


@dataclass
class OptimizeConfig:
    method: str = "htam"
    steps: int = 6
    seed: int = 0
    target: str = "cpu"
    language: str = "cpp"
    flat_k: int = 4  # experiences retrieved by the flat-memory baseline
    # The memory's id of the run. Default: method, task, seed and a part unique to the run
    # (htam.agent.rundir.new_run_id), kept in run.json and reused by a resume.
    run_id: str | None = None
    # Consecutive steps lost to the endpoint (each after the client's own retries) before the
    # run stops: one more try rides out a blip, more would only burn backoff time.
    infra_patience: int = 2
    duplicate_retries: int = 2  # asks for different code when a proposal repeats evaluated code
    # Fresh decisions a step may take when its strategy only repeated evaluated code (each
    # leaves out what was found exhausted); after them the step is spent as a repeat.
    redecisions: int = 3

    def __post_init__(self) -> None:
        self.steps = method_spec(self.method).steps_for(self.steps)
        if self.steps < 1:
            raise ValueError("steps must be at least 1")
        if self.redecisions < 0:
            raise ValueError("redecisions must be at least 0")
