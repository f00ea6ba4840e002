"""load_task: ids, levels, and one clear line for every kind of bad task file."""

import pytest

from htam.tasks import TaskError, instantiate, load_task, signature

from .helpers import GOOD, write

BAD = {
    "syntax.py": ("def broken(:\n    pass\n", "syntax error at line 1"),
    "imports.py": (
        "import torch\nimport htam_no_such_module\n" + GOOD,
        "import error: ModuleNotFoundError: No module named 'htam_no_such_module'",
    ),
    "no_inputs.py": (
        GOOD.replace("def get_inputs():", "def make_inputs():"),
        "missing get_inputs (a task defines Model, get_inputs, get_init_inputs)",
    ),
    "no_init_inputs.py": (
        GOOD.replace("def get_init_inputs():", "def init_inputs():"),
        "missing get_init_inputs (a task defines Model, get_inputs, get_init_inputs; a Model "
        "without arguments: def get_init_inputs(): return [])",
    ),
    "raises.py": (
        GOOD.replace("return torch.relu(x) * 2.0", "raise ValueError('reference exploded')"),
        "the reference failed at the reduced size (HTAM_SMALL): ValueError: reference exploded",
    ),
    "shapes.py": (
        GOOD.replace("torch.relu(x) * 2.0", "x @ x"),
        "the reference failed at the reduced size (HTAM_SMALL): RuntimeError: mat1 and mat2 "
        "shapes cannot be multiplied",
    ),
    "inputs_not_a_list.py": (  # list("hello") would call forward with five letters
        GOOD.replace("return [torch.randn(ROWS, COLS)]", 'return "hello"'),
        "get_inputs() failed at the reduced size (HTAM_SMALL): TypeError: get_inputs() returns "
        "str: it must return a list (or tuple) of the forward's arguments",
    ),
    "module_code.py": ("import torch\nN = 1 / 0\n", "module fails to execute: ZeroDivisionError"),
    "unknown_override.py": (
        GOOD.replace('{"ROWS": 3}', '{"ROWS": 3, "WIDTH": 4}'),
        "HTAM_SMALL overrides unknown constant(s) WIDTH",
    ),
}


# A reference that fails runs in an isolated process (seconds each): raises.py keeps that path in
# the fast tier, shapes.py (the same path, another exception) runs with the slow tests.
ISOLATED_AGAIN = {"shapes.py"}


@pytest.mark.parametrize(
    "filename",
    [pytest.param(n, marks=pytest.mark.slow) if n in ISOLATED_AGAIN else n for n in sorted(BAD)],
)
def test_bad_files_give_one_line_with_file_and_problem(tmp_path, filename):
    source, problem = BAD[filename]
    path = write(tmp_path / filename, source)
    with pytest.raises(TaskError) as info:
        load_task(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    assert problem in message
    assert info.value.where == str(path)


def test_missing_file(tmp_path):
    with pytest.raises(TaskError, match=r"nope\.py: no such file$"):
        load_task(tmp_path / "nope.py")


def test_validate_false_skips_running_the_reference(tmp_path):
    source = GOOD.replace("return torch.relu(x) * 2.0", "raise ValueError('later')")
    task = load_task(write(tmp_path / "lazy.py", source), validate=False)
    model, inputs = instantiate(task)
    with pytest.raises(ValueError, match="later"):
        model(*inputs)


def test_ids_levels_and_suites(tmp_path):
    plain = load_task(write(tmp_path / "7_Thing.py", GOOD))
    assert (plain.id, plain.name, plain.level) == ("local/7_Thing", "7_Thing", None)
    leveled = load_task(write(tmp_path / "mine" / "level2" / "3_Other.py", GOOD), suite="mine")
    assert (leveled.id, leveled.level) == ("mine/level2/3_Other", 2)
    kb = load_task(write(tmp_path / "KernelBench" / "level1" / "19_ReLU.py", GOOD))
    assert kb.id == "kernelbench/level1/19_ReLU"
    assert plain.digest == leveled.digest == kb.digest  # same source, same digest


def test_a_plain_kernelbench_file_is_large_at_every_size(tmp_path):
    task = load_task(write(tmp_path / "kb.py", GOOD.replace('HTAM_SMALL = {"ROWS": 3}\n', "")))
    assert signature(task, "small").inputs == [((8, 5), "float32")]
    assert signature(task, "large").inputs == [((8, 5), "float32")]


def test_small_override_applies_only_to_small(tmp_path):
    task = load_task(write(tmp_path / "sized.py", GOOD))
    assert signature(task, "small").inputs == [((3, 5), "float32")]
    assert signature(task, "large").inputs == [((8, 5), "float32")]
