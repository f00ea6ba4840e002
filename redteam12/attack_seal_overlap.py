"""Red team 12: the work hidden under the seal the judge credits to every runner.

The harness seals each output (SHA-256 over 256 KB blocks in an order drawn from the call's key)
after the call and inside the judge's clock; the judge takes each runner's hidden time (clock less
reported time) beyond the *reference runner's*, which is mostly that seal, as the candidate's
extra cost. A candidate that computes its ReLU block by block in the key's order on a native
thread while the harness's thread hashes the blocks already done spends about one seal in all,
and reports a small time: its clock less the reference's seal is near 0.

Reaches the harness through ``__builtins__``' setattr as red team 10 did (C++ could as well)."""

import hashlib
import random
import time

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

from htam.evaluate import harness as _h

REPORT_MS = 0.3  # what the candidate says each call took
_B = __builtins__ if isinstance(__builtins__, dict) else __builtins__.__dict__
_set = _B["set" + "attr"]

SOURCE = r"""
#include <atomic>
#include <thread>
#include <vector>
static std::atomic<long> done_blocks{0};
static std::thread worker;
void start(torch::Tensor x, torch::Tensor y, std::vector<int64_t> order, int64_t block) {
    done_blocks = 0;
    const float* p = x.data_ptr<float>();
    float* q = y.data_ptr<float>();
    int64_t n = x.numel();
    worker = std::thread([=]() {
        for (size_t k = 0; k < order.size(); ++k) {
            int64_t a = order[k] / 4, b = std::min(n, a + block / 4);
            for (int64_t i = a; i < b; ++i) q[i] = p[i] > 0.f ? p[i] : 0.f;
            done_blocks.store(k + 1, std::memory_order_release);
        }
    });
}
void wait_for(int64_t k) { while (done_blocks.load(std::memory_order_acquire) <= k) {} }
void join() { if (worker.joinable()) worker.join(); }
torch::Tensor relu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    const float* p = x.data_ptr<float>(); float* q = y.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) q[i] = p[i] > 0.f ? p[i] : 0.f;
    return y;
}
"""
ext = load_inline("rt12_seal_overlap", cpp_sources=SOURCE,
                  functions=["start", "wait_for", "join", "relu"],
                  extra_cflags=["-O3"])

BLOCK = 1 << 18  # buffers._HASH_BLOCK
_call = _h.Harness.call


def call(self, key=None):
    if key is None:
        return _call(self, key)
    t0 = time.perf_counter()
    x = self.inputs[self.active][0].contiguous()
    y = torch.empty_like(x)
    nbytes = y.numel() * 4
    blocks = list(range(0, nbytes, BLOCK))
    random.Random(key).shuffle(blocks)
    ext.start(x, y, blocks, BLOCK)
    digest = hashlib.sha256(key.to_bytes(8, "little"))
    data = memoryview(y.view(torch.uint8).numpy())
    for k, start in enumerate(blocks):
        ext.wait_for(k)
        digest.update(data[start : start + BLOCK])
    ext.join()
    self.pending = [y]
    seal = int.from_bytes(digest.digest()[:8], "little")
    ms = min(REPORT_MS, (time.perf_counter() - t0) * 1e3)
    self.send({"type": "done", "ms": ms, "seals": [seal]})


_set(_h.Harness, "call", call)


class ModelNew(nn.Module):
    def forward(self, x):  # never reached in a timed call: the static rule wants a kernel here
        return ext.relu(x.contiguous())
