"""Builds ahead of the device's queue: which load_inline calls are read from a source without
running it, that the key is the candidate's own, and that a prebuilt extension is loaded by the
timed evaluation instead of built again."""

import ast
import time
from pathlib import Path

import pytest

from htam.evaluate.host import inline_calls
from htam.evaluate.host.compile_cache import extension_key
from tests.evaluate.cases import RELU
from tests.evaluate.conftest import task_for

FIXTURES = Path(__file__).parent / "fixtures"

PLAIN = '''
import torch
from torch.utils.cpp_extension import load_inline
HEAD = "torch::Tensor f(torch::Tensor x);"
BODY = HEAD.replace(";", "") + " { return x; }"
KERNEL = """__global__ void k() {}"""
SRC = f"// {'v'}\\n" + KERNEL
ext = load_inline(name="e", cpp_sources=HEAD, cuda_sources=[SRC + "\\n"], functions=["f"],
                  extra_cuda_cflags=["-O3", "--use_fast_math"], verbose=False)
'''


def test_plain_arguments_are_read_as_the_candidate_binds_them():
    (found,) = inline_calls.calls(PLAIN)
    assert found["cuda_sources"] == ["// v\n__global__ void k() {}\n"]
    assert found["cpp_sources"] == "torch::Tensor f(torch::Tensor x);"
    # the key is the candidate wrapper's: the same bound arguments, ``verbose`` aside
    assert inline_calls.key(found) == f"e_{extension_key({**found, 'verbose': True})}"
    script = inline_calls.script(found)
    call = ast.parse(script).body[1].value  # the build job's call: exactly these arguments
    assert ast.literal_eval(call.keywords[0].value) == found


@pytest.mark.parametrize(
    "change",
    [
        ('HEAD = "', 'HEAD = open("h").read() + "'),  # a computed source
        ('"--use_fast_math"]', '"--use_fast_math", "-fplugin=./p.so"]'),  # a flag that runs code
        ("verbose=False)", "verbose=False, extra_include_paths=['/x'])"),
        ('name="e"', "name=NAME"),  # an unknown name
        ("ext = load_inline(", "ext = load_inline(*ARGS, "),
    ],
)
def test_what_is_not_plain_is_left_to_the_candidate(change):
    assert inline_calls.calls(PLAIN.replace(*change)) == []


def test_llm_idiomatic_extensions_are_read_without_running_them():
    # the corpus of LLM-written solutions (tests/evaluate/corpus): 37 of its 39 load_inline
    # solutions were read; the two left build a torch library op (is_python_module=False)
    corpus = sorted((Path(__file__).parent / "corpus").glob("*.py"))
    inline = [f for f in corpus if "load_inline" in f.read_text()]
    read = [f for f in inline if inline_calls.calls(f.read_text())]
    assert len(inline) >= 30 and len(read) >= 0.9 * len(inline)


def test_a_name_bound_twice_is_not_read():
    assert inline_calls.calls(PLAIN.replace("ext =", 'HEAD = "x"\next =')) == []


def _fresh(fixture: str) -> str:
    """The fixture with an extension source no earlier test has built (a comment in the file
    alone leaves the extension's sources, and so its cached build, the same)."""
    code = (FIXTURES / fixture).read_text()
    return code.replace("return y;", f"return y;  // {time.time_ns()}", 1)


@pytest.mark.slow
def test_a_prebuilt_extension_is_loaded_not_built(cpu_evaluator):
    code = _fresh("honest_relu_cpp.py")
    build_s = cpu_evaluator.prebuild(code, "cpp")
    assert build_s > 0
    assert cpu_evaluator.prebuild(code + "# another candidate, the same extension\n", "cpp") < 1.0
    events = cpu_evaluator.queue.events
    before = len(events)
    result = cpu_evaluator.evaluate(task_for(RELU), code + "# again\n", "cpp")
    assert result.status.value == "ok", result.messages
    (cand,) = [e for e in events[before:] if e["event"] == "candidate"]
    assert cand["prebuilt"] and cand["build_s"] < 1.0
    # the timed job built nothing: its build stage took well under a compile's time
    assert result.breakdown_s["compile_and_first_call"] < build_s / 2


@pytest.mark.slow
def test_a_failed_prebuild_is_not_kept_and_the_verdict_is_the_candidates_build(cpu_evaluator):
    code = (FIXTURES / "honest_relu_cpp.py").read_text().replace(
        "return y;", "return y  // no semicolon"
    ) + f"\n# {time.time_ns()}\n"
    cpu_evaluator.prebuild(code, "cpp")
    (arguments,) = inline_calls.calls(code)
    from htam.evaluate.host import integrity

    assert integrity.verified(cpu_evaluator.cache_dir, f"ext-{inline_calls.key(arguments)}") is None
    result = cpu_evaluator.evaluate(task_for(RELU), code, "cpp")
    assert result.status.value == "compile_error", result.messages


@pytest.mark.gpu
def test_a_cuda_extension_is_built_ahead_for_this_device_only(gpu_evaluator):
    code = _fresh("honest_relu_cuda.py")
    calls = inline_calls.calls(code)
    assert calls, "the fixture's load_inline is plain: it is prebuilt"
    assert gpu_evaluator.arch_list and "TORCH_CUDA_ARCH_LIST" in gpu_evaluator._env()
    build_s = gpu_evaluator.prebuild(code, "cuda")
    result = gpu_evaluator.evaluate(task_for(RELU), code, "cuda")
    assert result.status.value == "ok", result.messages
    assert result.breakdown_s["compile_and_first_call"] < build_s / 2
    (cand,) = [e for e in gpu_evaluator.queue.events if e["event"] == "candidate"][-1:]
    assert cand["prebuilt"] and cand["job_compile_s"] < 1.0


PLANTING = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

HONEST = r"""
torch::Tensor relu(torch::Tensor x) { return x.clamp_min(0); }  // STAMP
"""
# Its static initializer writes, when the build job imports it, a library at the honest
# extension's name and a file beside its own, both under the job's ext/ folder.
PLANTER = r"""
#include <cstdlib>
#include <fstream>
#include <string>
static int planted = [] {
    const char* root = std::getenv("TORCH_EXTENSIONS_DIR");
    if (root) {
        std::string base = std::string(root) + "/TOOLCHAIN/";
        std::ofstream(base + "HONEST_KEY/HONEST_KEY.so") << "htam-planted";
        std::ofstream(base + "PLANTER_KEY/htam-planted.txt") << "htam-planted";
    }
    return 0;
}();
torch::Tensor same(torch::Tensor x) { return x; }  // STAMP
"""
honest = load_inline("honest", cpp_sources=HONEST, functions=["relu"])
planter = load_inline("planter", cpp_sources=PLANTER, functions=["same"])


class ModelNew(nn.Module):
    def forward(self, x):
        return honest.relu(planter.same(x))
'''


def _planting_code() -> str:
    """The solution above, its sources stamped fresh and the planter told the names: the
    toolchain's folder, the honest extension's key and its own (the planter's key does not
    change with a name written into it: its stamp is fixed first)."""
    from htam.evaluate.host import pch

    code = PLANTING.replace("STAMP", str(time.time_ns()))
    honest_args, planter_args = inline_calls.calls(code)
    names = {"TOOLCHAIN": pch.toolchain_key(), "HONEST_KEY": inline_calls.key(honest_args)}
    code = code.replace("TOOLCHAIN", names["TOOLCHAIN"]).replace("HONEST_KEY", names["HONEST_KEY"])
    _, planter_args = inline_calls.calls(code)
    return code.replace("PLANTER_KEY", inline_calls.key(planter_args))


@pytest.mark.slow
def test_a_prebuild_keeps_only_the_extensions_own_library(cpu_evaluator):
    """A build made ahead kept the job's whole ext/ folder, and the preload merged the folders
    of a solution's extensions: files an extension's static initializer wrote at another's name
    came with it. Each build now keeps its own library alone."""
    from htam.evaluate.host import build_stage, integrity

    code = _planting_code()
    calls = inline_calls.calls(code)
    assert len(calls) == 2 and all("PLANTER_KEY" not in str(c) for c in calls)
    cpu_evaluator.prebuild(code, "cpp")
    for arguments in calls:
        key = inline_calls.key(arguments)
        kept = integrity.listed(cpu_evaluator.cache_dir, f"ext-{key}")
        assert kept == [build_stage._own(arguments)], kept
    staged = build_stage.prebuilt(cpu_evaluator, code, "cpp")
    files = sorted(str(p.relative_to(staged)) for p in staged.rglob("*") if p.is_file())
    assert files == sorted(build_stage._own(a) for a in calls), files
    honest = build_stage._own(calls[0])  # the planter's own library holds the words, not it
    assert b"htam-planted" not in (staged / honest).read_bytes()
