"""The kernel requirement, judged on what runs: once the candidate is timed, the judge asks it
for one more call with every result of its own kernels spoiled (candidate/kernels.py) and
compares the outputs with the reference's on the same inputs, itself.

- No call into its own kernels counted: the solution is torch-only, or launches its kernels
  only in code that never runs.
- Outputs that still match the reference: its kernels ran, but their results do not feed the
  outputs (a kernel on a side input while torch does the work).

Both are refused as ``rejected`` with the ``[no-kernel]`` cause. A probe whose call failed, or
whose outputs differ, shows that the outputs depend on the kernels.
"""

from __future__ import annotations

from htam.evaluate import channel
from htam.evaluate.judge.compare import compare_tensor
from htam.evaluate.judge.runner import Verdict
from htam.status import Status

TORCH_ONLY = "pass --allow-torch to time torch-only code"


def check(judge, module) -> None:
    """Raise the verdict when the candidate's outputs do not come from its own kernels."""
    x = judge.inputs(module)
    judge.stage(x)
    judge.held.seal(judge.ref.ins, x)
    judge.call(judge.ref, x, judge.call_timeout_s, "the kernel probe")
    cand = judge.cand
    for buf, v in zip(cand.ins, x, strict=True):
        if buf is not None:
            buf.copy_(v)
    judge.sync()
    seen = cand.ask(channel.Probe(), channel.Probed, judge.call_timeout_s)
    if seen.calls == 0:
        raise Verdict(
            Status.REJECTED,
            "[no-kernel] a call of ModelNew ran none of the kernels the solution built or "
            "defined (torch-only code, or kernels launched only in code that never runs); "
            f"{TORCH_ONLY}",
        )
    if seen.raised is not None:
        return  # the spoiled results broke the call: the outputs depend on them
    if all(
        compare_tensor(o, r, judge.job.tolerances) is None
        for o, r in zip(cand.slots, judge.ref.slots, strict=True)
    ):
        names = ", ".join(seen.kernels[:8])
        raise Verdict(
            Status.REJECTED,
            f"[no-kernel] the outputs do not come from the solution's kernels: with the results "
            f"of its {seen.calls} kernel calls ({names}) replaced by NaN, its outputs still "
            f"matched the reference (a kernel run beside torch doing the work); {TORCH_ONLY}",
        )
