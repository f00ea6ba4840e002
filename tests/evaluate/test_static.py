"""The static rules on source text: what counts as building a kernel."""

import pytest

from htam.evaluate.host import inline_calls
from htam.evaluate.host.static import check_source

HEAD = "import torch\nimport torch.nn as nn\n"
KERNEL = "from torch.utils.cpp_extension import load_inline\next = load_inline(name='e', cpp_sources='')\n"
MODEL = """
class ModelNew(nn.Module):
    def forward(self, x):
        ext.run(x)
        return x
"""


@pytest.mark.parametrize(
    ("build", "kernel"),
    [
        (
            "from torch.utils.cpp_extension import load\next = load(name='e', sources=['e.cpp'])",
            True,
        ),
        (
            "from torch.utils.cpp_extension import load as build\next = build(name='e', sources=[])",
            True,
        ),
        (
            "import torch.utils.cpp_extension as ce\next = ce.load_inline(name='e', cpp_sources='')",
            True,
        ),
        ("ext = torch.utils.cpp_extension.load(name='e', sources=['e.cpp'])", True),
        # loading something that is not an extension builds no kernel
        ("import io, json\next = json.load(io.StringIO('{}'))", False),
        ("ext = torch.load('weights.pt')", False),
        ("from json import load\next = load(open('x'))", False),
    ],
)
def test_only_cpp_extension_builds_count_as_a_kernel(build, kernel):
    found = {v.rule for v in check_source(HEAD + build + MODEL, "cpp")}
    assert ("no-kernel" not in found) is kernel, found


@pytest.mark.parametrize(
    ("line", "rule"),
    [
        # red team: the environment steered torch.compile's threads past the thread check
        ("os.environ['TORCHINDUCTOR_COMPILE_THREADS'] = '1'", "environment"),
        ("os.environ.update(OMP_NUM_THREADS='1')", "environment"),
        ("os.putenv('OMP_NUM_THREADS', '1')", "environment"),
        ("torch.backends.cudnn.__dict__['benchmark'] = True", "timer-patch"),
        ("fast = torch.compile(lambda x: x)", "torch-compiler"),
        ("import torch._inductor.config", "torch-compiler"),
        ("torch._dynamo.reset()", "torch-compiler"),
    ],
)
def test_environment_writes_and_torchs_compiler_are_refused(line, rule):
    code = "import os\n" + HEAD + line + "\n" + KERNEL + MODEL
    assert rule in {v.rule for v in check_source(code, "cpp")}
    if rule == "torch-compiler":  # torch-only code may use torch's compiler
        assert rule not in {v.rule for v in check_source(code, "cpp", allow_torch=True)}


def test_reading_the_environment_is_allowed():
    code = "import os\n" + HEAD + "d = os.environ.get('HTAM_CACHE_DIR')\n" + KERNEL + MODEL
    assert check_source(code, "cpp") == []


def test_a_cpp_solution_given_as_triton_is_told_its_language():
    """Newcomer round 8: a C++ solution evaluated with --language triton was told to pass
    --allow-torch."""
    build = "ext = torch.utils.cpp_extension.load_inline('e', cpp_sources='')\n"
    (found,) = [v for v in check_source(HEAD + build + MODEL, "triton") if v.rule == "no-kernel"]
    assert "give the language as cpp or cuda" in found.detail


@pytest.mark.parametrize(
    "guard",
    [
        # the shapes real LLM solutions give a guarded build or call (CUDA-L1, LLMKernel)
        "try:\n    ext = load_inline(name='e', cpp_sources='')\nexcept Exception as e:\n"
        "    print(e)\n    ext = None\n",
        "def run(x):\n    try:\n        return ext.run(x)\n    except:\n        return x\n",
        "def run(x):\n    try:\n        return ext.run(x)\n    except RuntimeError as e:\n"
        "        if 'out of memory' not in str(e):\n            raise\n    return x\n",
    ],
)
def test_a_guarded_build_or_call_is_not_refused(guard):
    """A fallback hidden by except is the kernel probe's to judge (a kernel that raised ran
    nothing the outputs depend on): the source alone cannot tell a guard from a cheat."""
    code = HEAD + KERNEL + guard + MODEL
    assert check_source(code, "cpp") == []


@pytest.mark.parametrize(
    ("line", "refused"),
    [
        # how LLM solutions set up their build (kernelbench.com and CUDA-L1 solutions)
        ("os.environ.setdefault('TORCH_CUDA_ARCH_LIST', '9.0a')", False),
        ("os.environ['TORCH_CUDA_ARCH_LIST'] = '9.0'", False),
        ("os.environ['CUDA_HOME'] = '/usr/local/cuda'", False),
        ("os.environ['PATH'] = '/usr/local/cuda/bin:' + os.environ.get('PATH', '')", False),
        ("os.environ.setdefault('MAX_JOBS', '4')", False),
        ("os.environ.pop('TORCH_CUDA_ARCH_LIST', None)", False),
        # what steers the runtime, the caches or the threads stays refused
        ("os.environ.setdefault('OMP_NUM_THREADS', '64')", True),
        ("os.environ['TORCH_EXTENSIONS_DIR'] = '/tmp/x'", True),
        ("os.environ[name] = '1'", True),  # a computed name
        ("os.environ.update(TORCH_CUDA_ARCH_LIST='9.0')", True),
    ],
)
def test_build_settings_in_the_environment_are_allowed(line, refused):
    code = "import os\nname = 'X'\n" + HEAD + line + "\n" + KERNEL + MODEL
    assert ("environment" in {v.rule for v in check_source(code, "cpp")}) is refused


@pytest.mark.parametrize(
    ("line", "refused"),
    [
        ("setattr(self, f'conv{i}', nn.Linear(2, 2))", False),  # a real LLM idiom
        ("delattr(self, 'conv0')", False),
        ("setattr(self.block, 'scale', 2.0)", False),
        ("setattr(torch.cuda.Event, 'elapsed_time', lambda *a: 1.0)", True),
        ("setattr(time, 'perf_counter', lambda: 0.0)", True),
        ("setattr(nn.Module, '__call__', None)", True),  # an imported root
        ("setattr(type(self), 'forward', None)", True),  # a computed object
        ("f = setattr", True),  # taken as a value, its target is unknown
    ],
)
def test_setattr_on_the_solutions_own_objects_is_allowed(line, refused):
    method = f"\n    def build(self, i):\n        {line}\n"
    code = "import time\n" + HEAD + KERNEL + MODEL + method
    assert ("timer-patch" in {v.rule for v in check_source(code, "cpp")}) is refused


def test_a_class_model_of_the_solutions_own_is_not_the_reference():
    """Level-3 LLM solutions keep a copy of the reference as their own ``class Model`` and
    subclass it; without one of its own, the name can only mean the reference."""
    own = "\nclass Model(nn.Module):\n    pass\n\n\nclass ModelNew(Model):\n    pass\n"
    assert check_source(HEAD + KERNEL + own, "cpp") == []
    borrowed = "\nclass ModelNew(Model):\n    pass\n"
    assert "reference-call" in {v.rule for v in check_source(HEAD + KERNEL + borrowed, "cpp")}
    nested = "\ndef f():\n    class Model:\n        pass\n" + MODEL + "\nm = Model()\n"
    assert "reference-call" in {v.rule for v in check_source(HEAD + KERNEL + nested, "cpp")}


@pytest.mark.parametrize(
    ("line", "refused"),
    [
        # kernels in the style of torch's generated code (KernelLLM) import its helpers
        ("from torch._inductor.runtime import triton_helpers", False),
        ("from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math", False),
        ("from torch._inductor.select_algorithm import extern_kernels", False),
        ("assert_size_stride = torch._C._dynamo.guards.assert_size_stride", False),
        ("from torch._C._dynamo.guards import _empty_strided_cuda", False),
        # what compiles, or reaches dynamo's frame hooks, stays refused
        ("from torch._inductor.select_algorithm import AlgorithmSelectorCache", True),
        ("from torch._inductor import config", True),
        ("hook = torch._C._dynamo.eval_frame", True),
        ("fast = torch._dynamo.optimize('inductor')", True),
    ],
)
def test_torchs_generated_code_style_is_not_its_compiler(line, refused):
    code = HEAD + line + "\n" + KERNEL + MODEL
    assert ("torch-compiler" in {v.rule for v in check_source(code, "cpp")}) is refused


@pytest.mark.parametrize("terms", [700, 5000])
@pytest.mark.usefixtures("default_recursion_limit")
def test_a_tree_too_deep_to_walk_is_refused_not_raised(terms):
    # Python runs a sum of 700 terms; the rules' recursive walk (and past 3,000 the parser)
    # raised RecursionError out of the evaluator, which ended the optimization run
    code = HEAD + KERNEL + MODEL + "\nX = 1" + " + 1" * terms + "\n"
    assert [v.rule for v in check_source(code, "triton")] == ["nesting"]
    # the build ahead finds the extension, or (past the parser's limit) nothing; never raises
    assert inline_calls.calls(code) in ([], [{"name": "e", "cpp_sources": ""}])
