"""Messages name where a task's shapes come from (its reduced HTAM_SMALL size, or the file's own
KernelBench size, which an unmodified KernelBench file has at size small too) and which of its
functions failed: ``get_inputs()`` is not "the reference"."""

import pytest

from htam.tasks import TaskError, load_task
from htam.tasks.module import has_small_size, size_label

from .helpers import GOOD, write

NO_SMALL = GOOD.replace('HTAM_SMALL = {"ROWS": 3}\n', "")


def test_size_labels_name_the_source_of_the_shapes():
    assert has_small_size(GOOD) and not has_small_size(NO_SMALL)
    assert size_label(GOOD, "small") == "the reduced size (HTAM_SMALL)"
    assert size_label(GOOD, "large") == "the full size"
    for size in ("small", "large"):  # one size, whichever is asked: never called "small"
        assert size_label(NO_SMALL, size).startswith("the KernelBench size")


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        (
            GOOD.replace("return [torch.randn(ROWS, COLS)]", "raise ValueError('no data')"),
            "get_inputs() failed at the reduced size (HTAM_SMALL): ValueError: no data",
        ),
        # Each failure loads the task in an isolated process (seconds each): the first case
        # keeps the path in the fast tier, the others run with the slow tests.
        pytest.param(
            NO_SMALL.replace("return [torch.randn(ROWS, COLS)]", "raise ValueError('no data')"),
            "get_inputs() failed at the KernelBench size (the file's own shapes; it has no "
            "HTAM_SMALL): ValueError: no data",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            GOOD.replace("return []", "raise KeyError('weights')"),
            "building the model (get_init_inputs(), Model(...)) failed at the reduced size "
            "(HTAM_SMALL): KeyError: 'weights'",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            GOOD.replace("return torch.relu(x) * 2.0", "raise RuntimeError('forward')"),
            "the reference failed at the reduced size (HTAM_SMALL): RuntimeError: forward",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_a_failure_says_which_function_failed_and_at_which_shapes(tmp_path, source, problem):
    path = write(tmp_path / "task.py", source)
    with pytest.raises(TaskError) as info:
        load_task(path)
    assert str(info.value) == f"{path}: {problem}"
