"""A task's signature: what the reference computes, how much, and on what shapes.

Shapes and FLOPs do not depend on the device, so the reference is first run on the ``meta``
device (no data, no time, any size); only when an op has no meta kernel or the reference
branches on data does it run for real on ``device``. FLOPs come from
``torch.utils.flop_counter.FlopCounterMode``, which counts matrix multiplications,
convolutions and attention (elementwise ops and reductions count 0). Bytes are the compulsory
traffic: inputs + outputs + parameters and buffers, each touched once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from htam.tasks.families import families, op_family
from htam.tasks.module import Size
from htam.tasks.runtime import StageError, instantiate, nbytes, tensors
from htam.tasks.task import Task, TaskError

TensorSpec = tuple[tuple[int, ...], str]  # (shape, dtype name such as "float32")

_SHAPE_SOURCES = {"getattr", "size", "dim", "numel"}  # fx nodes that yield Python values
_SKIPPED_ATEN = {"detach", "lift_fresh", "lift_fresh_copy", "alias", "empty", "empty_strided"}
_SHORT_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64",
                 "int64": "i64", "int32": "i32", "int8": "i8", "uint8": "u8", "bool": "bool"}  # fmt: skip


@dataclass
class Signature:
    ops: list[str]  # op names in execution order (fx graph, else aten dispatch)
    families: list[str]  # coarse families (htam.tasks.families.FAMILIES), first appearance order
    inputs: list[TensorSpec]  # tensor inputs
    outputs: list[TensorSpec]
    param_count: int
    flops: int
    bytes: int
    intensity: float  # FLOPs per byte
    text: str  # one-line human summary for prompts and memory evidence
    op_source: str  # "fx" or "dispatch": where ``ops`` came from

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["inputs"] = [[list(shape), dtype] for shape, dtype in self.inputs]
        data["outputs"] = [[list(shape), dtype] for shape, dtype in self.outputs]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Signature:
        data = dict(data)
        for key in ("inputs", "outputs"):
            data[key] = [(tuple(shape), dtype) for shape, dtype in data[key]]
        return cls(**data)


_CACHE: dict[tuple[str, str], Signature] = {}
STAGE_MARK = "htam-stage: "  # the isolated child's last line when a StageError stopped it
SIGNATURE_TIMEOUT_S = 300.0


def signature(task: Task, size: Size = "small", device: str = "cpu") -> Signature:
    """The task's signature at ``size``, cached in-process by (task digest, size)."""
    sig = meta_signature(task, size)
    if sig is None:  # no meta kernel, or data-dependent code: run it for real, isolated
        sig = _CACHE[(task.digest, size)] = isolated_signature(task, size, device)
    return sig


def meta_signature(task: Task, size: Size = "small") -> Signature | None:
    """The signature as far as the meta device tells it (no data, no time, any size; cached
    like ``signature``), or None when the reference cannot run there."""
    key = (task.digest, size)
    if key not in _CACHE:
        try:
            _CACHE[key] = compute_signature(task, size, "meta")
        except Exception:
            return None
    return _CACHE[key]


def isolated_signature(task: Task, size: Size, device: str) -> Signature:
    """``compute_signature`` on real data in a child process under the evaluator's isolation
    (namespaces, read-only filesystem, own user id, rlimits: what the machine offers), with a
    scrubbed environment and a timeout: the reference is user code, and running it for real in
    the caller's process would let it touch the loop, its files and its secrets.
    Raises TaskError with the child's last line when it fails."""
    from htam.evaluate.host.forkserver import scrubbed_env

    request = {"id": task.id, "name": task.name, "source": task.source, "size": size,
               "device": device}  # fmt: skip
    root = str(Path(__file__).resolve().parents[2])  # the htam this process runs
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory(prefix="htam-signature-") as job:
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "htam.tasks.signatures", job],
                input=json.dumps(request), capture_output=True, text=True,
                timeout=SIGNATURE_TIMEOUT_S, env=scrubbed_env({"PYTHONPATH": path}),
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            raise TaskError(
                task.id, f"the reference ran over {SIGNATURE_TIMEOUT_S:.0f} s"
            ) from None
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        cause = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        if cause.startswith(STAGE_MARK):  # get_inputs() or the model's construction failed
            raise TaskError(task.id, cause.removeprefix(STAGE_MARK))
        raise TaskError(task.id, f"the reference failed to run: {cause}")
    return Signature.from_dict(json.loads(lines[-1]))


def _isolated_main(job: str) -> None:
    from htam.evaluate.sandbox import candidate_user, isolation

    request = json.loads(sys.stdin.read())
    uid = candidate_user.candidate_uid(os.getpid(), 7)
    isolation.enter(job, uid, isolation.probe(), isolation.Limits())
    task = Task(request["id"], request["name"], request["source"])
    try:
        sig = compute_signature(task, request["size"], request["device"])
    except StageError as error:  # one line, that says which of the task's functions failed
        print(f"{STAGE_MARK}{error}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps(sig.to_dict()))


def compute_signature(task: Task, size: Size, device: str) -> Signature:
    """Uncached: build the reference on ``device`` and run it once under the counters."""
    model, inputs = instantiate(task, size, device=device, staged=True)
    fx_ops = fx_op_names(model)
    capture = _OpCapture()
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter, capture:
        output = model(*inputs)
    ops = fx_ops if fx_ops is not None else capture.ops
    state = [*model.parameters(), *model.buffers()]
    total_bytes = nbytes(inputs) + nbytes(output) + nbytes(state)
    flops = int(counter.get_total_flops())
    sig = Signature(
        ops=ops,
        families=families(ops) or ["other"],
        inputs=[_spec(t) for t in tensors(inputs)],
        outputs=[_spec(t) for t in tensors(output)],
        param_count=sum(p.numel() for p in model.parameters()),
        flops=flops,
        bytes=total_bytes,
        intensity=flops / total_bytes if total_bytes else 0.0,
        text="",
        op_source="fx" if fx_ops is not None else "dispatch",
    )
    sig.text = summary(sig)
    return sig


def fx_op_names(model: torch.nn.Module) -> list[str] | None:
    """Op names from a torch.fx trace, or None when the model cannot be traced symbolically."""
    try:
        graph = torch.fx.symbolic_trace(model).graph
    except Exception:  # fx fails in many ways (data-dependent flow, math on proxies)
        return None
    modules = dict(model.named_modules())
    ops = []
    shape_nodes: set[torch.fx.Node] = set()
    for node in graph.nodes:
        if node.op not in ("call_module", "call_function", "call_method"):
            continue
        if _is_shape_arithmetic(node, shape_nodes):
            # x.shape, x.size(1), d_model // heads: bookkeeping on Python ints, not tensor ops.
            shape_nodes.add(node)
            continue
        if node.op == "call_module":
            name = type(modules[node.target]).__name__
        elif node.op == "call_function":
            name = getattr(node.target, "__name__", str(node.target))
        else:
            name = str(node.target)
        ops.append(_normalize(name))
    return ops


def _is_shape_arithmetic(node: torch.fx.Node, shape_nodes: set[torch.fx.Node]) -> bool:
    if node.op == "call_module":
        return False
    name = getattr(node.target, "__name__", str(node.target))
    if name in _SHAPE_SOURCES:
        return True
    inputs = node.all_input_nodes
    return bool(inputs) and all(n in shape_nodes for n in inputs)


class _OpCapture(TorchDispatchMode):
    """Records the aten ops a forward dispatches (the fallback when fx cannot trace)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = _normalize(func.overloadpacket.__name__)
        if name not in _SKIPPED_ATEN:
            self.ops.append(name)
        return func(*args, **(kwargs or {}))


def _normalize(name: str) -> str:
    name = name.lower().strip("_")
    return {"truediv": "div", "native_layer_norm": "layer_norm"}.get(name, name)


def _spec(t: torch.Tensor) -> TensorSpec:
    return tuple(t.shape), str(t.dtype).removeprefix("torch.")


def format_specs(specs: list[TensorSpec]) -> str:
    """``f32[33x257], i64[3]``: compact shapes for tables and prompts."""
    parts = []
    for shape, dtype in specs:
        dims = "x".join(str(d) for d in shape) if shape else "scalar"
        parts.append(f"{_SHORT_DTYPES.get(dtype, dtype)}[{dims}]")
    return ", ".join(parts)


def human(n: float, unit: str = "") -> str:
    """1234567 -> '1.23M' (decimal prefixes)."""
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g}{prefix}{unit}"
    return f"{n:.3g}{unit}"


def summary(sig: Signature, max_ops: int = 10) -> str:
    compact: list[str] = []
    for op in sig.ops:
        if op_family(op) is not None and (not compact or compact[-1] != op):
            compact.append(op)
    shown = compact[:max_ops] + (["..."] if len(compact) > max_ops else [])
    return (
        f"{' -> '.join(shown) or 'no compute ops'} [{', '.join(sig.families)}]; "
        f"in {format_specs(sig.inputs)}; out {format_specs(sig.outputs)}; "
        f"{human(sig.flops, 'FLOP')}, {human(sig.bytes, 'B')}, "
        f"{sig.intensity:.3g} FLOP/B, {human(sig.param_count)} params"
    )


if __name__ == "__main__":
    _isolated_main(sys.argv[1])
