"""Feedback an LLM can act on: a failed build shows its first error with the line, a wrong
answer its first differing elements with their indices and both values, a timeout its phase."""

import socket

import torch

from htam.evaluate.frames import RunnerInfo
from htam.evaluate.host.compile_cache import build_failure
from htam.evaluate.judge.compare import TOLERANCES, compare_tensor
from htam.evaluate.judge.runner import PHASES, Runner, Verdict

INCLUDE_CHAIN = "".join(
    f"In file included from /usr/lib/python3/site-packages/torch/include/ATen/h{k}.h:{k}:\n"
    for k in range(60)
)
GCC_LOG = (
    "Error building extension 'relu_ext_0123': [1/2] c++ -MMD -MF main.o.d ... -c "
    "/cache/ext/relu_ext_0123/main.cpp -o main.o\nFAILED: main.o\n"
    + INCLUDE_CHAIN
    + "/cache/ext/relu_ext_0123/main.cpp:14:23: error: 'fmaxx' was not declared in this scope\n"
    "   14 |         dst[i] = fmaxx(src[i], 0.f);\n"
    "      |                  ^~~~~\n"
    "/cache/ext/relu_ext_0123/main.cpp:20:5: error: expected ';' before '}' token\n"
    + INCLUDE_CHAIN
    + "ninja: build stopped: subcommand failed.\n"
)
NVCC_LOG = (
    "Error building extension 'k': [1/3] nvcc ... -c /cache/ext/k/cuda.cu -o cuda.cuda.o\n"
    "FAILED: cuda.cuda.o\n"
    '/cache/ext/k/cuda.cu(9): error: identifier "blockidx" is undefined\n'
    "      int i = blockidx.x * blockDim.x + threadIdx.x;\n"
    '              ^\n\n1 error detected in the compilation of "/cache/ext/k/cuda.cu".\n'
)


def test_a_failed_build_shows_its_first_error_with_the_line():
    said = build_failure(RuntimeError(GCC_LOG))
    head = said.split("... the end of the build log")[0]
    assert head.startswith("the build failed with 2 errors; the first, in main.cpp line 14")
    assert "main.cpp:14:23: error: 'fmaxx' was not declared" in head
    assert "dst[i] = fmaxx(src[i], 0.f);" in head  # the quoted source line and its caret
    assert "In file included from" not in head
    assert len(said) < 2500  # not 4k characters of include chain


def test_an_nvcc_error_shows_its_line():
    said = build_failure(RuntimeError(NVCC_LOG))
    assert said.startswith("the build failed with 1 error; the first, in cuda.cu line 9")
    assert 'identifier "blockidx" is undefined' in said
    assert "int i = blockidx.x" in said


def test_a_log_without_a_compiler_error_is_kept_whole():
    assert build_failure(RuntimeError("ninja: not found")) == "RuntimeError: ninja: not found"


def test_a_wrong_answer_shows_the_first_differing_elements():
    ref = torch.linspace(-1, 1, 24).reshape(2, 3, 4)
    out = ref.clone()
    out[0, 1, 2] = 5.0
    out[1, 2, 3] = -3.0
    said = compare_tensor(out, ref, TOLERANCES)
    assert "first differing: at [0, 1, 2] got 5, expected" in said
    assert "at [1, 2, 3] got -3, expected 1" in said


def test_a_timeout_names_its_phase():
    ours, theirs = socket.socketpair()
    runner = Runner(ours, RunnerInfo(uid=0, pid=0, by_uid=False), trusted=False)
    try:
        runner.answer(0.05, "build")
    except Verdict as v:
        assert v.status == "timeout"
        assert v.message.endswith(PHASES["build"])
        assert "build phase" in v.message
    else:
        raise AssertionError("no timeout")
    finally:
        ours.close()
        theirs.close()
