"""The buffers the judge lends a runner for one configuration: a copy of each input tensor (plain
values travel in the request) and a slot for each output, shaped like the reference's. On the
CPU each is a sealed memfd whose descriptor travels beside the request; on a GPU an IPC handle."""

from __future__ import annotations

import torch

from htam.evaluate import buffers, channel
from htam.evaluate.judge.runner import Runner, Verdict, jsonable


def lend_to(
    runner: Runner,
    index: int,
    sample: list,
    specs: list[tuple[list[int], torch.dtype]],
    grads: int,
    device: str,
    timeout_s: float,
    lent: list[buffers.Lent],
) -> None:
    """Lend ``runner`` the buffers of configuration ``index`` (inputs like ``sample``, outputs
    of ``specs``; a backward task's last ``grads`` inputs are its grad_outputs) and tell it so.
    Each buffer goes into ``lent`` as soon as it exists, for the judge to free."""
    runner.ins, runner.slots, fds, desc_in = [], [], [], []
    for k, x in enumerate(sample):
        if isinstance(x, torch.Tensor):
            buf = _lend(list(x.shape), x.dtype, device, f"input {k}")
            lent.append(buf)
            runner.ins.append(buf.tensor)
            desc_in.append({"tensor": buf.descriptor})
            fds += [buf.fd] if buf.fd is not None else []
        else:
            runner.ins.append(None)
            desc_in.append({"value": jsonable(x, f"input {k}")})
    desc_out = []
    for k, (shape, dtype) in enumerate(specs):
        buf = _lend(shape, dtype, device, f"output {k}")
        lent.append(buf)
        runner.slots.append(buf.tensor)
        desc_out.append(buf.descriptor)
        fds += [buf.fd] if buf.fd is not None else []
    request = channel.Buffers(config=index, inputs=desc_in, outputs=desc_out, grad_outputs=grads)
    runner.ask(request, channel.Ready, timeout_s, fds)


def _lend(shape: list[int], dtype: torch.dtype, device: str, what: str) -> buffers.Lent:
    if buffers.dtype_name(dtype) not in buffers.DTYPES:
        raise Verdict.unjudgeable(f"the reference's {what} has dtype {dtype}, not supported")
    return buffers.lend(shape, buffers.dtype_name(dtype), device)
