"""load_suite over a fake KernelBench checkout, task directories and Robust-KBench style tasks."""

import json

import pytest

from htam.tasks import TaskError, instantiate, load_suite, load_task, num_extra, signature

from .helpers import CONFIGS, FUNCTIONAL, GOOD, write


@pytest.fixture
def checkout(tmp_path):
    """A KernelBench repository root: KernelBench/level{1,2,4}/*.py plus noise."""
    kb = tmp_path / "repo" / "KernelBench"
    for name in ("1_A.py", "2_B.py", "10_C.py", "__init__.py"):
        write(kb / "level1" / name, GOOD)
    write(kb / "level1" / "notes.txt", "not a task")
    write(kb / "level2" / "1_D.py", GOOD)
    write(kb / "level4" / "1_HF.py", "import transformers\n")  # excluded by default
    write(tmp_path / "repo" / "README.md", "KernelBench")
    return tmp_path / "repo"


def test_kernelbench_checkout(checkout):
    ids = [t.id for t in load_suite(str(checkout))]
    assert ids == [
        "kernelbench/level1/1_A",
        "kernelbench/level1/2_B",
        "kernelbench/level1/10_C",
        "kernelbench/level2/1_D",
    ]
    # the KernelBench/ folder itself is accepted too, with the same ids
    assert [t.id for t in load_suite(checkout / "KernelBench")] == ids
    assert [t.id for t in load_suite(checkout, levels=[2])] == ["kernelbench/level2/1_D"]
    assert [t.id for t in load_suite(checkout, pattern="*C")] == ["kernelbench/level1/10_C"]
    assert [t.level for t in load_suite(checkout, levels=[1])] == [1, 1, 1]


def test_one_level_folder_keeps_the_ids_of_its_files(checkout, tmp_path):
    """A KernelBench level folder (``KernelBench/level1``) names its tasks as the checkout and
    each file alone do, never ``level1/level1/1_A``; so does any folder named ``levelN``."""
    level1 = checkout / "KernelBench" / "level1"
    ids = [t.id for t in load_suite(level1)]
    assert ids == ["kernelbench/level1/1_A", "kernelbench/level1/2_B", "kernelbench/level1/10_C"]
    assert [t.id for t in load_suite(level1 / "2_B.py")] == ["kernelbench/level1/2_B"]
    assert [t.level for t in load_suite(level1)] == [1, 1, 1]
    mine = tmp_path / "mine" / "level2"
    write(mine / "3_E.py", GOOD)
    assert [t.id for t in load_suite(mine)] == [t.id for t in load_suite(mine / "3_E.py")]
    assert [t.id for t in load_suite(mine)] == ["local/level2/3_E"]


def test_bad_files_are_collected_or_raised(checkout):
    bad = write(checkout / "KernelBench" / "level1" / "3_Bad.py", "def f(:\n")
    errors: list[TaskError] = []
    tasks = load_suite(checkout, errors=errors)
    assert len(tasks) == 4 and len(errors) == 1
    assert errors[0].where == str(bad) and "syntax error" in str(errors[0])
    with pytest.raises(TaskError, match="3_Bad.py: syntax error"):
        load_suite(checkout)
    with pytest.raises(TaskError, match="no such file or directory"):
        load_suite(str(checkout / "missing"))


def test_directory_of_tasks_and_single_file(tmp_path):
    folder = tmp_path / "mytasks"
    write(folder / "relu2.py", GOOD)
    write(folder / "dense.py", FUNCTIONAL)
    write(folder / "configured" / "task.py", FUNCTIONAL)
    write(folder / "configured" / "configs.json", json.dumps(CONFIGS))
    ids = [t.id for t in load_suite(folder)]
    assert ids == ["mytasks/configured", "mytasks/dense", "mytasks/relu2"]
    assert [t.id for t in load_suite(folder / "relu2.py")] == ["local/relu2"]
    # levels filter out tasks that have no level
    assert load_suite(folder, levels=[1]) == []


def test_solution_files_beside_the_tasks_are_not_tasks(tmp_path):
    """A candidate kept next to its task (ModelNew, no get_inputs) is skipped without being run;
    a file that merely fails to define a task is still an error, not silently dropped."""
    folder = tmp_path / "work"
    write(folder / "relu2.py", GOOD)
    write(folder / "relu2_fast.py", "import sys\nsys.exit(3)\nclass ModelNew:\n    pass\n")
    write(folder / "typo.py", "class MyModel:\n    pass\n")
    errors: list[TaskError] = []
    assert [t.id for t in load_suite(folder, errors=errors)] == ["work/relu2"]
    assert [e.where for e in errors] == [str(folder / "typo.py")]


def _shapes(task, size, extra=None):
    model, inputs = instantiate(task, size, extra=extra)
    return tuple(inputs[0].shape), model.scale


def test_configs_in_the_file(tmp_path):
    source = FUNCTIONAL + f"\nHTAM_CONFIGS = {CONFIGS!r}\n"
    task = load_task(write(tmp_path / "functional.py", source))
    assert num_extra(task) == 2
    assert _shapes(task, "large") == ((4, 33), 1.0)  # the first configuration is the timed one
    assert _shapes(task, "small") == ((4, 33), 1.0)
    assert _shapes(task, "large", extra=0) == ((2, 65), 2.0)
    # configurations are completed with the module's defaults, so none leaks into another
    assert _shapes(task, "large", extra=1) == ((64, 10), 1.0)
    assert signature(task, "large").flops == 2 * 4 * 33 * 33


def test_configs_with_small_size_and_extras(tmp_path):
    source = FUNCTIONAL + (
        f'\nHTAM_CONFIGS = {CONFIGS!r}\nHTAM_SMALL = {{"BATCH": 3}}\nHTAM_EXTRA = [{{"DIM": 7}}]\n'
    )
    task = load_task(write(tmp_path / "functional.py", source))
    assert num_extra(task) == 3  # HTAM_EXTRA first, then the other configurations
    assert _shapes(task, "small") == ((3, 33), 1.0)
    assert _shapes(task, "small", extra=0) == ((3, 7), 1.0)
    assert _shapes(task, "small", extra=1) == ((2, 65), 2.0)


def test_task_directory_with_configs_json(tmp_path):
    directory = tmp_path / "level2" / "dense_tanh"
    write(directory / "forward.py", FUNCTIONAL)
    write(directory / "configs.json", json.dumps({"configs": CONFIGS}))
    task = load_task(directory)
    assert (task.id, task.name, task.level) == ("local/level2/dense_tanh", "dense_tanh", 2)
    assert "HTAM_CONFIGS" in task.source  # the evaluator sees the configurations
    assert num_extra(task) == 2
    assert _shapes(task, "large", extra=1) == ((64, 10), 1.0)
    assert [t.id for t in load_suite(directory)] == ["local/level2/dense_tanh"]


@pytest.mark.parametrize(
    ("files", "problem"),
    [
        ({"forward.py": FUNCTIONAL, "configs.json": "[{"}, "configs.json: invalid JSON"),
        ({"forward.py": FUNCTIONAL, "configs.json": "[]"}, "expected a non-empty list"),
        (
            {"forward.py": FUNCTIONAL, "configs.json": '[{"WIDTH": 3}]'},
            "overrides unknown constant(s) WIDTH",
        ),
        (
            {"a.py": GOOD, "b.py": GOOD, "configs.json": "[{}]"},
            "exactly one .py task file (found a.py, b.py)",
        ),
        (
            {"forward.py": FUNCTIONAL + "HTAM_CONFIGS = []\n", "configs.json": "[{}]"},
            "defines HTAM_CONFIGS and has a configs.json",
        ),
    ],
)
def test_bad_task_directories(tmp_path, files, problem):
    directory = tmp_path / "task"
    for name, text in files.items():
        write(directory / name, text)
    with pytest.raises(TaskError) as info:
        load_task(directory)
    assert problem in str(info.value) and "\n" not in str(info.value)
