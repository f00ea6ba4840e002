"""The single-read path for rows too long for one program's registers (``htam_row_coop``).

On the GPU the chunks of a row wait for each other (a spin on the row's counter). The
interpreter runs programs one after another, so here the kernel runs with the row counters
already past every wait: each run stores every chunk's partials before it reads them, so after
one run per pass (plus one) every partial a program combines is the right one, and the output
shows whether the kernel's chunking, combine and in-register output are right.
"""

import re

import pytest
import torch

from htam.offline.pipeline import analyze
from htam.offline.strategies import family_strategies
from tests.offline.cases import everything
from tests.offline.harness import build_pair, load_solution, solution, task_of
from tests.offline.sources import kb

CACHE = ("data_reuse.register_row_cache",)
CASES = {
    "softmax": "torch.softmax(x * 3.0, dim=1)",
    "log_softmax": "F.log_softmax(x, dim=-1)",
    "layer_norm": "F.layer_norm(x, (x.shape[-1],), self.w, self.b)",
    "l2_norm": "x / torch.norm(x, p=2, dim=1, keepdim=True)",
    "l1_norm": "x / torch.sum(torch.abs(x), dim=1, keepdim=True)",
    "rms_scaled": "x * torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + 1e-5) * 0.5",
}


def _task(name: str, rows: int = 3, cols: int = 20000):
    body = f"""
ROWS = {rows}
COLS = {cols}

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(COLS))
        self.b = nn.Parameter(torch.randn(COLS))

    def forward(self, x):
        return {CASES[name]}
"""
    return task_of(f"coop_{name}_{rows}x{cols}", kb(body, "[torch.randn(ROWS, COLS) * 2 + 0.5]"))


def _interpretable(code: str, sms: int = 132) -> str:
    """The solution with its coop path taken on the CPU (a GPU of ``sms`` SMs): the row counters
    start past every wait, and the partials persist from one call to the next (see the module
    docstring). ``_KEPT`` holds the coop path's partials once it has run."""
    swaps = {
        "t_x.is_cuda": "True",
        "torch.cuda.get_device_properties(t_x.device).multi_processor_count": str(sms),
        "sync = torch.zeros(n_rows + 1, dtype=torch.int32, device=t_x.device)": (
            "sync = torch.full((n_rows + 1,), 1 << 20, dtype=torch.int32); sync[0] = 0"
        ),
        "part = torch.empty((": "part = _kept((",
    }
    for old, new in swaps.items():
        assert old in code, old
        code = code.replace(old, new, 1)
    kept = """
_KEPT = {}


def _kept(shape, dtype, device):
    return _KEPT.setdefault((shape, dtype), torch.zeros(shape, dtype=dtype))

"""
    return code + kept


@pytest.mark.parametrize("name", list(CASES))
# rows off 16-byte boundaries; a last chunk cut by the row's end; whole chunks only
@pytest.mark.parametrize("cols", [20001, 20000, 16384 + 8192])
def test_coop_kernel_combines_chunks_like_the_reference(name, cols):
    task = _task(name, cols=cols)
    for strategies in [CACHE, everything(task, "triton")]:
        code = solution(task, "triton", strategies)
        assert "def htam_row_coop_plain(" in code and "coop[(n_rows * csplit,)]" in code
        model, new, (x,) = build_pair(task, load_solution(_interpretable(code)), {})
        with torch.no_grad():
            expected = model(x)
            for _ in range(3):  # one call per pass of partials, then the checked one
                got = new(x)
        torch.testing.assert_close(got, expected, atol=2e-5, rtol=2e-4, msg=f"{strategies}")


@pytest.mark.slow
@pytest.mark.parametrize("sms, chunk", [(4, 8192), (2, 16384), (1, None)])
def test_chunks_grow_until_a_row_has_one_per_sm_else_the_loop_runs(sms, chunk):
    task = _task("softmax", cols=20000)  # 3 chunks of 8192; 2 of 16384; never 1
    code = solution(task, "triton", CACHE)
    module = load_solution(_interpretable(code, sms))
    model, new, (x,) = build_pair(task, module, {})
    with torch.no_grad():
        expected = model(x)
        for _ in range(3):
            got = new(x)
    torch.testing.assert_close(got, expected, atol=2e-5, rtol=2e-4)
    shapes = [shape for shape, _ in module._KEPT]
    assert shapes == ([(2, 3, -(-20000 // chunk))] if chunk else []), shapes


@pytest.mark.parametrize("cols, kernel", [(24576, "full"), (20000, "plain"), (20001, "plain")])
def test_whole_chunks_take_the_unmasked_kernel(cols, kernel):
    """Softmax's rows of 393216 are 48 whole chunks: no masks, 128 registers a thread instead of
    140, and 75% of memory speed of light instead of 66% (H200, run 41)."""
    code = solution(_task("softmax", cols=cols), "triton", CACHE)
    swapped = re.sub(rf"\bhtam_row_coop_{kernel}\b(?!\()", "htam_row_coop_missing", code)
    module = load_solution(_interpretable(swapped, 4))
    model, new, (x,) = build_pair(_task("softmax", cols=cols), module, {})
    with pytest.raises(NameError, match="htam_row_coop_missing"):
        new(x)
    full = code[code.index("def htam_row_coop_full(") : code.index("def htam_row_coop_plain(")]
    assert "mask" not in full.replace("mask=sj < SPLIT", "")
    # the masked kernel's registers capped at 128: 4 programs a SM instead of 3 (L1Norm 82% to
    # 87% of memory speed of light, L2Norm 79% to 87%, H200 run 45)
    assert (
        "(htam_row_coop_full, {}) if R % cb == 0 else (htam_row_coop_plain, {'maxnreg': 128})"
        in code
    )


def test_coop_chunk_is_64_elements_a_thread_whatever_the_block_and_warps():
    """Chunks of 8192 on 4 warps were the fastest on the H200 (run 28). A launch that took the
    chunk from the block and the warps from the parameters ran L2Norm's at 16384 on 4 warps
    after a block and a per-lane strategy (62.8% of speed of light against 79.4%, runs 28-30)."""
    task = _task("l2_norm", cols=20001)
    tuned = ("parallel_mapping.block_size_tuning", "instruction_throughput.warp_shuffle_reduction")
    for strategies in [CACHE, (*tuned, *CACHE)]:
        code = solution(task, "triton", strategies)
        assert "for c in (8192, 16384)" in code and "num_warps=cb // 2048, **regs)" in code, (
            strategies
        )


def test_coop_is_gpu_only_and_needs_the_cache_and_an_elementwise_output():
    task = _task("softmax")
    assert "htam_row_coop" not in solution(task, "triton")  # the baseline: no register cache
    code = solution(task, "triton", CACHE)
    assert "if t_x.is_cuda and inner == 1" in code
    assert "if cbs:" in code
    # a per-row output is read once already: no coop kernel
    body = """
class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sum(x, dim=1)
"""
    summed = task_of("coop_sum", kb(body, "[torch.randn(3, 20000)]"))
    assert "data_reuse.register_row_cache" in family_strategies(analyze(summed))
    assert "htam_row_coop" not in solution(summed, "triton", CACHE)


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("shape", [(64, 100003), (5, 393216), (300, 16385), (2, 2 * 8192 * 132)])
def test_coop_path_on_gpu(name, shape):
    task = _task(name, *shape)
    module = load_solution(solution(task, "triton", CACHE))
    model, new, (x,) = build_pair(task, module, {})
    model, new, x = model.cuda(), new.cuda(), x.cuda()
    with torch.no_grad():
        expected = model(x)
        for _ in range(3):  # repeated launches: fresh counters every call
            torch.testing.assert_close(new(x), expected, atol=2e-5, rtol=2e-4)


@pytest.mark.parametrize("name, waits", [("softmax", 1), ("log_softmax", 1), ("layer_norm", 2)])
def test_a_softmax_waits_once_and_rescales_its_kept_exps(name, waits):
    """A softmax's chunk keeps exp(x - m) for its own max and rescales it after its one wait: 88%
    of memory speed of light against 75% with a wait for the max and one for the sum (H200, run
    43). Means and variances keep a wait each."""
    code = solution(_task(name, cols=24576), "triton", CACHE)
    full = code[code.index("def htam_row_coop_full(") : code.index("def htam_row_coop_plain(")]
    assert full.count("while seen <") == waits
    if name == "softmax":
        assert len(re.findall(r"tl\.exp\((?:in_x|v\d+)", full)) == 1  # one exp an element
        assert re.search(r"= ex(\d+) \* tl\.exp\(ml\1 - r\1\)\[:, None\]", full)
