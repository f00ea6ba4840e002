"""A scripted proposer for bench tests: fixed Triton code per task (run by the interpreter on the
CPU), built inside each worker through ``ProposerSpec(factory="tests.bench.helpers:FixedProposer")``.

- ``1_ReLU`` and ``3_Sigmoid``: correct kernels; step 1 changes the block size, so it is a new
  candidate.
- ``4_Tanh``: a kernel that computes ReLU instead: always ``incorrect``.
- a task named in ``die_on``: the proposer kills its own worker process (SIGKILL) when asked for
  code, which is how a worker crash looks to the parent.
"""

from __future__ import annotations

import os
import signal
import time

from htam.proposer import Choice, Proposal, ProposalRequest, Strategy, Usage

KERNEL = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(y_ptr + offs, EXPR, mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        k[(triton.cdiv(x.numel(), BLOCK_SIZE),)](x, y, x.numel(), BLOCK=BLOCK_SIZE)
        return y
'''

EXPRESSIONS = {"1_ReLU": "tl.maximum(x, 0.0)", "3_Sigmoid": "tl.sigmoid(x)",
               "4_Tanh": "tl.maximum(x, 0.0)"}  # wrong on purpose
TASKS = tuple(f"builtin/level1/{name}" for name in EXPRESSIONS)


def code_for(task_name: str, step: int) -> str:
    block = 1024 if step == 0 else 512
    return KERNEL.replace("EXPR", EXPRESSIONS[task_name]).replace("BLOCK_SIZE", str(block))


class FixedProposer:
    name = "fixed"

    def __init__(self, target: str, language: str, delay_s: float = 0.0,
                 die_on: tuple[str, ...] = (), cost_per_call: float = 0.001):
        self.delay_s, self.die_on, self.cost = delay_s, tuple(die_on), cost_per_call

    def can_propose(self, task) -> bool:
        return True

    def choose_strategy(self, request: ProposalRequest, candidates: list[Strategy]) -> Choice:
        return Choice(candidates[0], rationale="first candidate")

    def propose(self, request: ProposalRequest) -> Proposal:
        name = request.task.name
        if name in self.die_on:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(self.delay_s)  # gives a test time to kill the worker mid-unit
        usage = Usage(prompt_tokens=100, completion_tokens=50, cost_usd=self.cost, calls=1)
        return Proposal(code_for(name, request.step), usage=usage)


class StaggeredProposer(FixedProposer):
    """4_Tanh's units take 10 s a step longer: a test that stops a bench once some units are done
    finds the others still running, however fast the workers run them side by side."""

    def propose(self, request: ProposalRequest) -> Proposal:
        if request.task.name == "4_Tanh":
            time.sleep(10.0)
        return super().propose(request)
