"""A reference that needs more host memory than allowed fails with one line that names the
limit, its figures and the option that raises it."""

import pytest

from htam.evaluate import EvalConfig, Evaluator
from htam.tasks import load_task
from htam.tasks.task import TaskError

BIG_OUTPUT = """import torch
import torch.nn as nn

N = 1 << 29  # 2 GiB of float32 out, twice over


class Model(nn.Module):
    def forward(self, x):
        y = x.expand(N).clone()
        return y + 1


def get_inputs():
    return [torch.ones(1)]


def get_init_inputs():
    return []
"""


@pytest.mark.slow
def test_a_reference_over_the_host_limit_names_the_limit_and_the_option(tmp_path):
    path = tmp_path / "big_output.py"
    path.write_text(BIG_OUTPUT)
    task = load_task(path)
    with Evaluator("cpu", EvalConfig(size="large", memory_limit_mb=1024)) as evaluator:
        with pytest.raises(TaskError) as caught:
            evaluator.reference(task, timed=False)
    message = str(caught.value)
    assert "\n" not in message
    assert "the reference needs more host memory than the" in message and "GiB allowed" in message
    assert "the 1.0 GiB allowed" in message and "--memory-limit-mb" in message


def test_a_reference_over_the_limit_inside_a_candidates_job_is_not_the_candidates_failure():
    """The judge and the reference's runner over the limit while a candidate was judged: the
    task cannot be judged here, which stops the run instead of teaching the memory a failure
    (newcomer: a suite run recorded it as the candidate's runtime error)."""
    from htam.evaluate.host.verdict import EVALUATOR_FAILED, judge_outcome
    from htam.evaluate.host.watchdog import JobOutcome
    from htam.evaluate.result import EvalResult
    from htam.status import Status

    for kind, infrastructure in (("reference", True), ("memory", False)):
        result = EvalResult(Status.OK)
        outcome = JobOutcome(killed="over the limit", kill_kind=kind)
        judge_outcome(result, outcome, EvalConfig())
        assert result.status == Status.RUNTIME_ERROR
        assert result.infrastructure is infrastructure
        assert result.messages[0].startswith(EVALUATOR_FAILED) is infrastructure


@pytest.mark.slow
@pytest.mark.parametrize("alone_ok", [True, False])
def test_a_reference_failing_only_beside_a_candidate_is_the_candidates_failure(
    cpu_evaluator, monkeypatch, alone_ok
):
    """Red team 4, hole 4: a candidate that holds the GPU's memory makes the reference's runner
    fail beside it. The evaluator runs the reference alone: if it runs, the candidate is blamed
    and the run goes on; if not, the task cannot be judged here."""
    from htam.evaluate.host.watchdog import JobOutcome
    from htam.evaluate.judge.runner import Verdict
    from tests.evaluate.cases import FIXTURES, RELU
    from tests.evaluate.conftest import task_for

    task = task_for(RELU)
    cpu_evaluator.reference(task)  # timed and cached before the patch
    real = cpu_evaluator._run
    seen = []

    def run(job, candidate=None, runner=None):
        seen.append(job.kind)
        if job.kind == "judge":
            failed = Verdict.unjudgeable("CUDA out of memory").record()
            return JobOutcome(frames=[failed])
        if not alone_ok:
            return JobOutcome(killed="the reference's process ended", kill_kind="reference")
        return real(job, candidate, runner)

    monkeypatch.setattr(cpu_evaluator, "_run", run)
    code = (FIXTURES / "honest_relu_triton.py").read_text()
    result = cpu_evaluator.evaluate(task, code, "triton")
    assert seen == ["judge", "reference"]
    assert result.status == "runtime_error"
    assert result.infrastructure is not alone_ok
    if alone_ok:
        assert result.messages == [
            "the reference failed beside this candidate (CUDA out of memory) but runs alone: "
            "the candidate's use of shared resources (GPU memory, the machine's) is blamed"
        ]
    else:
        assert result.messages == ["the evaluator could not judge this task: CUDA out of memory"]


def test_the_references_host_memory_beside_a_candidate_is_never_the_candidates(
    cpu_evaluator, monkeypatch
):
    """Newcomer round 7: Robust-KBench's llama_rmsnorm checks configurations of 1 GiB tensors,
    and the judge with the reference's runner went past the CPU's limit beside every candidate;
    the reference ran alone, so each candidate was blamed. The judge's and the runner's host
    memory is theirs: the task cannot be judged at this limit, and nothing is run alone."""
    from htam.evaluate.host.watchdog import JobOutcome
    from tests.evaluate.cases import FIXTURES, RELU
    from tests.evaluate.conftest import task_for

    task = task_for(RELU)
    cpu_evaluator.reference(task)
    seen = []
    breach = "the reference needs more host memory than the 1.0 GiB allowed"

    def run(job, candidate=None, runner=None):
        seen.append(job.kind)
        return JobOutcome(killed=breach, kill_kind="reference")

    monkeypatch.setattr(cpu_evaluator, "_run", run)
    code = (FIXTURES / "honest_relu_triton.py").read_text()
    result = cpu_evaluator.evaluate(task, code, "triton")
    assert seen == ["judge"]
    assert result.infrastructure and breach in result.messages[0]


@pytest.mark.parametrize(
    ("fixture", "lower", "message"),
    [
        ("attack_disk_unlinked.py", "disk", "of the 0.0 GiB allowed (with files removed but open)"),
        ("attack_inode_flood.py", "entries", "holds more than 1000 files and folders"),
    ],
)
def test_what_a_job_directory_holds_unseen_counts_against_its_limits(
    cpu_evaluator, monkeypatch, fixture, lower, message
):
    """Red team 5: files removed but held open (blocks in no folder) and empty files (inodes, no
    blocks) got past the disk limit. Each fixture holds its files past the watchdog's disk
    check, under a limit lowered for the test."""
    import dataclasses

    from htam.evaluate.host import folders
    from tests.evaluate.cases import FIXTURES, RELU
    from tests.evaluate.conftest import task_for

    if lower == "disk":
        limits = cpu_evaluator._limits
        monkeypatch.setattr(
            cpu_evaluator, "_limits", lambda: dataclasses.replace(limits(), disk_limit_mb=32)
        )
    else:
        monkeypatch.setattr(folders, "MAX_ENTRIES", 1000)
    code = (FIXTURES / fixture).read_text()
    result = cpu_evaluator.evaluate(task_for(RELU), code, "triton")
    assert result.status == "runtime_error", result.messages
    assert result.messages[0].startswith("killed: disk: the candidate's job directory holds ")
    assert message in result.messages[0]


@pytest.mark.parametrize(
    ("fixture", "status", "where"),
    [
        pytest.param("honest_hinge_triton.py", "ok", "", marks=pytest.mark.slow),
        ("cheat_input_distribution.py", "incorrect", "the trial on scaled and shifted inputs"),
        # each is a whole evaluation: one cheat of each kind stays in the fast tier
        pytest.param("cheat_count_calls.py", "incorrect", "timed call ", marks=pytest.mark.slow),
        pytest.param("cheat_detect_shift.py", "ok", "", marks=pytest.mark.slow),
    ],
)
def test_a_shortcut_from_the_inputs_distribution_fails_on_shifted_inputs(fixture, status, where):
    """Red team 5: a loss computed from the targets alone passes every draw of get_inputs (the
    predictions' mean is always 0.5). The trial on scaled and shifted inputs tells it apart from
    the honest kernel, which passes it; a candidate honest on the trials and not after them
    meets the shift again in the timed calls, every one of them shifted: one that tells shifted
    inputs apart and takes the shortcut on the others (red team 6) finds none to take it on."""
    result = _judged("hinge_task.py", fixture, "triton", min_timed=12)
    assert result.status == status, result.messages
    if status == "incorrect":
        assert result.messages[0].startswith(where)
        assert "on scaled and shifted inputs" in result.messages[0]


@pytest.mark.parametrize(
    ("fixture", "status"),
    # seconds of the Triton interpreter each: the fast tier has the shifted inputs' cheat above
    [
        pytest.param("honest_norm_triton.py", "ok", marks=pytest.mark.slow),
        pytest.param("cheat_norm_distribution.py", "incorrect", marks=pytest.mark.slow),
    ],
)
def test_a_large_output_gets_the_shifted_inputs_too(fixture, status):
    """Red team 6: x / ||x|| written as x * sqrt(3 / n), the norm of uniform inputs, passes
    every draw of get_inputs; the outputs are large, and the shifted inputs were only for small
    ones. The honest kernel passes them."""
    result = _judged("frobenius_task.py", fixture, "triton")
    assert result.status == status, result.messages
    if status == "incorrect":
        assert "on scaled and shifted inputs" in result.messages[0]


@pytest.mark.parametrize(
    ("fixture", "status"),
    # the honest hinge is a minute and more of the interpreter on 2 cores, the cheat seconds: the
    # fast tier has the shifted inputs' cheat above
    [
        pytest.param("honest_hinge_triton.py", "ok", marks=pytest.mark.slow),
        pytest.param("cheat_subsample_loss.py", "incorrect", marks=pytest.mark.slow),
    ],
)
def test_a_loss_over_a_sample_misses_the_planted_outliers(fixture, status):
    """Red team 6: the mean over every other row is inside the tolerance on every input, shifted
    or not; outliers planted at secret places in each shifted call are not."""
    # the honest kernel takes 4,096 programs a call under the interpreter: with the cheat's
    # seconds, both cases took 134 s alone on 2 cores, and a limit of 120 s was close
    result = _judged("hinge_big_task.py", fixture, "triton", run_timeout_s=300.0)
    assert result.status == status, result.messages
    if status == "incorrect":
        assert "scaled and shifted inputs with outliers planted" in result.messages[0]


@pytest.mark.parametrize(
    ("fixture", "status"),
    [("honest_backward_mean.py", "ok"), ("cheat_backward_distribution.py", "incorrect")],
)
@pytest.mark.slow  # over a minute each on 2 cores; forward shifted inputs stay fast
def test_a_backward_task_gets_the_shifted_inputs_too(fixture, status):
    """Red team 7: a backward task had no shifted inputs, so a forward returning the inputs'
    mean as a constant passed with an exact gradient (1.5x against the honest 1.1x)."""
    result = _judged("mean_backward_task.py", fixture, "cpp")
    assert result.status == status, result.messages
    if status == "incorrect":
        assert "on scaled" in result.messages[0]
    else:  # its gradient is a large output, so no outliers: said (red team 9), as for a BCE
        assert any("a backward task's gradients are large outputs" in f for f in result.flags)


@pytest.mark.parametrize(
    ("task", "fixture"),
    [
        ("labels_freq_task.py", "cheat_labels_prior.py"),
        ("hinge_count_task.py", "cheat_mixed_output_hinge.py"),
    ],
)
@pytest.mark.slow  # over a minute each on 2 cores; forward shifted inputs stay fast
def test_integer_inputs_and_outputs_do_not_spare_a_task_the_shifted_inputs(task, fixture):
    """Red team 8: a task whose inputs were all integers had nothing shifted (the uniform prior
    of its labels passed at 534x), and one with an integer output beside its loss had no
    shifted inputs at all (a loss from the targets alone, 357x). Integer inputs are skewed now,
    and one floating output is enough."""
    result = _judged(task, fixture, "cpp")
    assert result.status == "incorrect", result.messages
    assert "on scaled and shifted inputs" in result.messages[0]


@pytest.mark.slow
def test_work_done_while_the_harness_takes_the_outputs_is_timed():
    """Red team 8: a list subclass whose __iter__ finished the work did it after the clock; the
    items are taken inside it now, so the fixture's 40 ms wait is in its own time."""
    result = _judged("level1/1_ReLU.py", "cheat_late_iter_list.py", "triton")
    assert result.status == "ok", result.messages
    assert result.runtime_ms >= 40.0


@pytest.mark.slow
def test_the_median_timed_call_is_one_without_outliers():
    """Red team 9: with outliers in every timed call they were the workload timed, and a
    shortcut they allow (a logsumexp made trivial by one planted column) was timed at 9x. Fewer
    than half the timed calls carry them now: a candidate fast only on those is timed slow."""
    from htam.evaluate.judge.judge_timing import OUTLIER_MIN_TIMED, outlier_calls

    for n in (OUTLIER_MIN_TIMED, 17, 40):
        picks = outlier_calls(n)
        assert len(picks) == (n - 1) // 2 and picks <= set(range(n))
    result = _judged("hinge_task.py", "cheat_fast_on_outliers.py", "triton", allow_torch=True)
    assert result.status == "ok", result.messages
    assert result.runtime_ms >= 400.0, result.runtime_ms  # else about 150 (the interpreter)


def _judged(task, fixture: str, language: str, **config):
    """A fixture candidate's result on a task (a fixture's file name, or a built-in task)."""
    from tests.evaluate.cases import FIXTURES
    from tests.evaluate.conftest import fast_config, task_for

    path = FIXTURES / task if (FIXTURES / str(task)).exists() else task
    code = (FIXTURES / fixture).read_text()
    with Evaluator("cpu", fast_config(**config)) as evaluator:
        return evaluator.evaluate(task_for(path), code, language)
