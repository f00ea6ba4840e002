"""Reading replies: the last ModelNew block, reasoning sections, JSON answers."""

from __future__ import annotations

import json

import pytest

from htam.llm import extract_code, extract_json, split_think

from .helpers import GOOD_CODE

OLD = "import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    pass\n"


def fenced(code: str, tag: str = "python") -> str:
    return f"```{tag}\n{code.rstrip()}\n```"


@pytest.mark.parametrize("tag", ["python", "py", "", "Python"])
def test_fenced_block_with_any_python_tag(tag):
    assert extract_code(f"Here it is:\n\n{fenced(GOOD_CODE, tag)}\n\nEnjoy.") == GOOD_CODE


def test_last_block_defining_model_new_wins():
    reply = (
        f"First try:\n{fenced(OLD)}\nBetter:\n{fenced(GOOD_CODE)}\n"
        f"Usage:\n{fenced('model = ModelNew()')}\n"
    )
    assert extract_code(reply) == GOOD_CODE


def test_other_languages_are_ignored():
    reply = f"{fenced('class ModelNew {};', 'cpp')}\n{fenced(GOOD_CODE)}"
    assert extract_code(reply) == GOOD_CODE
    assert extract_code(fenced("class ModelNew {};", "cpp")) is None


def test_a_python_module_in_a_fence_of_another_language_is_read():
    assert extract_code(f"Here:\n{fenced(GOOD_CODE, 'cpp')}\n") == GOOD_CODE
    assert extract_code(f"{fenced('void f() {}', 'cpp')}\n{fenced(GOOD_CODE, 'text')}") == GOOD_CODE


def test_a_json_answer_holding_the_module_is_read():
    assert extract_code(json.dumps({"code": GOOD_CODE, "notes": "fused"})) == GOOD_CODE
    inner = json.dumps({"answer": {"files": ["notes", fenced(GOOD_CODE)]}})
    assert extract_code(inner) == GOOD_CODE
    assert extract_code('{"strategy_id": "tiling", "ratio') is None
    assert extract_code(json.dumps({"code": "class ModelNew {};"})) is None


def _split(code: str) -> tuple[str, str]:
    kernel, module = code.split("class ModelNew", 1)
    return kernel, "class ModelNew" + module


def test_a_kernel_and_its_module_in_two_blocks_are_one_module():
    kernel, module = _split(GOOD_CODE)
    reply = f"The kernel:\n{fenced(kernel)}\nThe module:\n{fenced(module)}\n"
    code = extract_code(reply)
    assert code is not None and "@triton.jit" in code and code.rstrip().endswith(module.rstrip())
    compile(code, "joined", "exec")
    # imports in a third block, before the kernel's: what the kernel uses comes too
    imports, body = kernel.split("\n\n\n", 1)
    reply = f"{fenced(imports)}\n{fenced('note = 1')}\n{fenced(body)}\n{fenced(module)}"
    code = extract_code(reply)
    assert code is not None and code.startswith(imports.strip()) and "note = 1" not in code


def test_a_complete_module_takes_nothing_from_earlier_blocks():
    kernel, _ = _split(GOOD_CODE)
    reply = f"{fenced(kernel.replace('relu2_kernel', 'old_kernel'))}\n{fenced(GOOD_CODE)}"
    assert extract_code(reply) == GOOD_CODE


def test_crlf_and_think_sections():
    reply = f"<think>\nmaybe {fenced(OLD)}\n</think>\nFinal:\n{fenced(GOOD_CODE)}".replace(
        "\n", "\r\n"
    )
    assert extract_code(reply) == GOOD_CODE
    only_thought = f"<think>{fenced(GOOD_CODE)}</think>No code, sorry."
    assert extract_code(only_thought) is None


def test_reply_that_is_just_code():
    assert extract_code(GOOD_CODE) == GOOD_CODE
    assert extract_code("Sure! Here is the code.\n" + GOOD_CODE) == GOOD_CODE


def test_unclosed_final_fence_is_used_only_when_complete():
    assert extract_code(f"Here:\n```python\n{GOOD_CODE}") == GOOD_CODE
    truncated = GOOD_CODE[: GOOD_CODE.index("def forward") + 20]
    assert extract_code(f"Here:\n```python\n{truncated}") is None


@pytest.mark.parametrize(
    "reply",
    [
        "I cannot help with that.",
        fenced("import torch\n\nclass Model(nn.Module):\n    pass\n"),
        fenced("x = ModelNew  # class ModelNew is elsewhere\n"),
        "",
    ],
)
def test_replies_without_model_new_give_none(reply):
    assert extract_code(reply) is None


def test_split_think_variants():
    assert split_think("<think>a</think>b") == ("a", "b")
    assert split_think("a</think>\nb") == ("a", "b")  # opening tag eaten by the chat template
    assert split_think("b<think>cut off") == ("cut off", "b")
    assert split_think("<think>x</think>mid<think>y</think>end") == ("x\n\ny", "midend")
    assert split_think("plain") == (None, "plain")


@pytest.mark.parametrize(
    "reply",
    [
        '{"strategy_id": "a.b", "rationale": "r"}',
        'I pick:\n```json\n{"strategy_id": "a.b", "rationale": "r"}\n```',
        'Answer: {"strategy_id": "a.b", "rationale": "r"} as asked.',
        '<think>{"strategy_id": "no"}</think>{"strategy_id": "a.b", "rationale": "r"}',
    ],
)
def test_extract_json(reply):
    assert extract_json(reply) == {"strategy_id": "a.b", "rationale": "r"}


def test_extract_json_failure():
    with pytest.raises(ValueError, match="no valid JSON"):
        extract_json("strategy_id: a.b")


@pytest.mark.usefixtures("default_recursion_limit")
def test_code_nested_past_the_parsers_limit_is_no_code():
    # a sum of 5,000 terms written out: ast.parse raises RecursionError, which ended the run
    deep = "import torch\nclass ModelNew:\n    pass\nx = 1" + " + 1" * 5000 + "\n"
    assert extract_code(deep) is None
    assert extract_code(f"Here:\n```python\n{deep}") is None


def test_a_lone_surrogate_becomes_a_question_mark():
    # json.loads takes "\\ud83d" from an endpoint's reply; no file or encoder takes the result
    code = extract_code(f"```python\n{GOOD_CODE}# \ud83d\n```")
    assert code is not None and code.endswith("# ?\n")
    code.encode()
