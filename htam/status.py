"""Evaluation statuses and the fault taxonomy shared by the evaluator, the memory and the loop
(no heavy imports).

Whose doing an outcome is decides what happens to it:

==========  ===================================================  ===========================
fault       examples                                             what the loop does
==========  ===================================================  ===========================
kernel      wrong output, compile error, crash, a hang of its    learned, cached as a verdict
            own, a cheat (``rejected``)
proposer    no applicable strategy (offline), code repeating an  named in the step; not
            earlier step                                         learned, nothing evaluated
endpoint    a reply in prose, HTTP 4xx on a request, a reply     repaired once by the
            cut at ``max_tokens``; unreachable/down (stops run)  proposer, else named; never
                                                                 learned
evaluator   the fork server died, the reference cannot run here  retried on a fresh server,
                                                                 else named ``lost``; never
                                                                 learned or cached
machine     a timeout the kernel did not cause (load), host OOM  retried, else named; never
            of the judge, a watchdog limit of the machine's      learned or cached
draw        ``incorrect`` only on inputs the judge drew in       judged again on fresh
            secret (shifted, outliers planted), and correct on   draws; named, the candidate
            fresh draws: a TF32 GEMM one element off on one      is not used; never learned
            planted outlier in 22 runs
==========  ===================================================  ===========================

Only ``Fault.KERNEL`` outcomes are evidence about a strategy; every other one says nothing of
the kernel and must never reach the memory or the evaluation cache as a verdict.
"""

from enum import StrEnum


class Status(StrEnum):
    # Verdicts of the evaluator on a candidate it judged.
    OK = "ok"
    REJECTED = "rejected"  # the candidate broke the rules (a cheat, forbidden code): only that
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    INCORRECT = "incorrect"
    # A step's outcome where no candidate was judged: never learned, never cached.
    NO_CODE = "no_code"  # the proposer's reply held no code (prose, a refused or cut reply)
    REPEAT = "repeat"  # the code repeats an earlier step's (judged once, there)
    NO_STRATEGY = "no_strategy"  # the offline proposer has no template (the step names the family)
    LOST = "lost"  # the evaluation was lost to the evaluator or the machine

    @property
    def correct(self) -> bool:
        return self is Status.OK

    @property
    def judged(self) -> bool:
        """A verdict on a candidate (as opposed to a step where none was judged)."""
        return self not in UNJUDGED


UNJUDGED = frozenset({Status.NO_CODE, Status.REPEAT, Status.NO_STRATEGY, Status.LOST})


class Fault(StrEnum):
    """Whose doing an outcome is (see the module docstring): only the kernel's is learned."""

    KERNEL = "kernel"
    PROPOSER = "proposer"
    ENDPOINT = "endpoint"
    EVALUATOR = "evaluator"
    MACHINE = "machine"
    DRAW = "draw"  # a verdict that depended on the inputs drawn, not on the strategy

    @property
    def learned(self) -> bool:
        return self is Fault.KERNEL


# Kept for readers of the old name: the outcome of a step whose proposer wrote no code.
NO_CODE = Status.NO_CODE.value
# An out-of-memory that the evaluation's own GPU footprint explains (htam.evaluate.footprint):
# a Fault.EVALUATOR cause, never the candidate's, never learned.
EVALUATOR_GPU_MEMORY = "the evaluator's own GPU memory"
