"""Timing and device-peak measurement, run inside the evaluator's child processes.

The clocks are captured when this module is imported — in the fork server, before any candidate
code exists — so a candidate that patches ``time`` or ``torch.cuda.Event`` does not touch them.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable, Sequence

import torch

_perf = time.perf_counter
_Event = torch.cuda.Event
_sync = torch.cuda.synchronize


def summary(samples_ms: list[float], method: str, meaningful: bool) -> dict:
    ordered = sorted(samples_ms)
    q = statistics.quantiles(ordered, n=4) if len(ordered) >= 2 else [ordered[0]] * 3
    return {
        "median_ms": statistics.median(ordered),
        "min_ms": ordered[0],
        "max_ms": ordered[-1],
        "iqr_ms": q[2] - q[0],
        "trials": len(ordered),
        "method": method,
        "meaningful": meaningful,
    }


def _count(estimate_ms: float, budget_ms: float, lo: int, hi: int) -> int:
    return max(lo, min(hi, int(budget_ms / max(estimate_ms, 1e-3))))


def timer(device: str, flush_mb: int) -> Callable[[Callable, Sequence], tuple[float, float, float]]:
    """One timed call: (device ms, host ms, ms of device work still running after the end
    event). The judge times the reference with it and the candidate's harness its calls, so the
    two are measured alike."""
    if device == "cuda":
        return _cuda_call(torch.empty(flush_mb << 20, dtype=torch.uint8, device="cuda"))
    return _cpu_call


def _cuda_call(flush: torch.Tensor) -> Callable[[Callable, Sequence], tuple[float, float, float]]:
    def once(fn: Callable, args: Sequence) -> tuple[float, float, float]:
        t0 = _perf()
        # A read evicts the L2 and leaves it clean (zeroing would leave dirty lines whose
        # write-back lands, by chance, inside the timed call). It is queued, not waited for: the
        # GPU evicts while the host queues the call, so host jitter before the call stays out.
        flush.sum(dtype=torch.int64)
        start, end = _Event(enable_timing=True), _Event(enable_timing=True)
        start.record()
        fn(*args)
        end.record()
        end.synchronize()
        t1 = _perf()
        _sync()  # the whole device: work left on other streams shows up as time after the end
        t2 = _perf()
        return start.elapsed_time(end), (t2 - t0) * 1e3, (t2 - t1) * 1e3

    return once


def _cpu_call(fn: Callable, args: Sequence) -> tuple[float, float, float]:
    t0 = _perf()
    fn(*args)
    ms = (_perf() - t0) * 1e3
    return ms, ms, 0.0


def time_fns(
    fns: Sequence[Callable],
    input_sets: Sequence[Sequence],
    cfg: dict,
    device: str,
    meaningful: bool = True,
) -> list[dict]:
    """Time each of ``fns`` with calls interleaved (a b, b a, a b, ...), so that clocks, memory
    placement and neighbours affect all of them alike: their ratio is a side-by-side measurement.

    CUDA: events per call with an L2 flush before each, and the host time between the end event
    and a device-wide synchronize as a check that no work escaped the timed stream (side
    streams). Warm-up and the adaptive call count follow host wall time, which such work cannot
    hide from.
    """
    once = timer(device, cfg["l2_flush_mb"])
    rounds: list[list[tuple[float, float, float]]] = []

    def one_round(i: int) -> float:
        args = input_sets[i % len(input_sets)]
        order = range(len(fns)) if i % 2 == 0 else reversed(range(len(fns)))  # no position bias
        times = {k: once(fns[k], args) for k in order}
        rounds.append([times[k] for k in range(len(fns))])
        return sum(t[1] for t in times.values())

    i, warm_ms = 0, 0.0
    while warm_ms < cfg["warmup_ms"] or len(rounds) < 2:
        warm_ms += one_round(i)
        i += 1
    per_round = statistics.median(sum(c[1] for c in r) for r in rounds)
    rounds.clear()
    for i in range(_count(per_round, cfg["timing_budget_ms"], cfg["min_timed"], cfg["max_timed"])):
        one_round(i)
    method = "cuda_events" if device == "cuda" else "perf_counter"
    out = []
    for k in range(len(fns)):
        stats = summary([r[k][0] for r in rounds], method, meaningful)
        if device == "cuda":
            stats["wall_median_ms"] = statistics.median(r[k][1] for r in rounds)
        out.append(stats)
    return out


def measure_peaks(device: str) -> dict:
    """Copy bandwidth (bytes read + written per second) and matmul throughput on ``device``."""
    if device == "cuda":
        return _cuda_peaks()
    return _cpu_peaks()


def _best_of(fn: Callable[[], object], reps: int, sync: Callable[[], None]) -> float:
    fn()
    sync()
    best = float("inf")
    for _ in range(reps):
        t0 = _perf()
        fn()
        sync()
        best = min(best, _perf() - t0)
    return best


def _cuda_peaks() -> dict:
    # float32 streams (a uint8 copy moves too few bytes per thread to reach the roof): the best
    # of a copy (1 GiB each way) and an add (two 1 GiB reads, one write), bytes read + written.
    n = 1 << 28
    a, b, c = (torch.rand(n, device="cuda") for _ in range(3))
    copy_s = _best_of(lambda: c.copy_(a), 20, _sync)
    add_s = _best_of(lambda: torch.add(a, b, out=c), 20, _sync)
    bandwidth = max(2 * 4 * n / copy_s, 3 * 4 * n / add_s) / 1e9
    out = {"device": torch.cuda.get_device_name(), "bandwidth_gbs": bandwidth}
    m = 8192
    for name, dtype, tf32 in (
        ("bf16", torch.bfloat16, False),
        ("tf32", torch.float32, True),
        ("fp32", torch.float32, False),
    ):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a = torch.randn(m, m, device="cuda", dtype=dtype)
        b = torch.randn(m, m, device="cuda", dtype=dtype)
        secs = _best_of(functools.partial(torch.mm, a, b), 10, _sync)
        out[f"{name}_tflops"] = 2 * m**3 / secs / 1e12
    torch.backends.cuda.matmul.allow_tf32 = False
    return out


def _cpu_peaks() -> dict:
    n = 1 << 28
    src = torch.empty(n, dtype=torch.uint8).random_(0, 255)
    dst = torch.empty_like(src)
    copy_s = _best_of(lambda: dst.copy_(src), 5, lambda: None)
    m = 1024
    a, b = torch.randn(m, m), torch.randn(m, m)
    mm_s = _best_of(lambda: torch.mm(a, b), 10, lambda: None)
    fp32 = 2 * m**3 / mm_s / 1e12
    return {
        "device": "cpu",
        "bandwidth_gbs": 2 * n / copy_s / 1e9,
        "fp32_tflops": fp32,
        "tf32_tflops": fp32,
        "bf16_tflops": fp32,
    }
