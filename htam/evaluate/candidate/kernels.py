"""The candidate's own kernels, seen from its process: every function of an extension it builds
(``load_inline``, ``load``, and the operators such a build registers under ``torch.ops``) and
every launch of a Triton kernel its module defines go through a wrapper that the harness puts
in place before a line of the solution runs.

Outside a probe the wrapper only passes the call on. During the judge's kernel probe it counts
the call and then spoils what the kernel produced: each tensor it returned, and each tensor
argument it changed, is overwritten with NaN (integers and booleans are inverted). The judge
compares the probe's outputs with the reference's: outputs that still match did not come from
the kernels (a kernel run on a side input while torch does the work), and a probe that counted
no call ran none (torch-only code, a kernel launched only in code that never runs).

What this can and cannot see is in docs/evaluator.md ("The kernel requirement").
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator

import torch

CANDIDATE_MODULE = "htam_candidate"  # the name the harness imports the solution under
_MAX_NAMES = 64


class Observer:
    def __init__(self) -> None:
        self.probing = False
        self.calls: dict[str, int] = {}
        self._wrapped: set[int] = set()  # ids of wrappers already in place
        # during the probe, each tensor whose address the solution took (``t.data_ptr()``) by
        # that address: a kernel given raw pointers (the offline C++ kernels, ctypes) writes
        # through them, and those tensors are its arguments as much as tensors passed whole
        self._pointed: dict[int, torch.Tensor] = {}
        self._data_ptr: Callable | None = None

    # ------------------------------------------------------------------ the probe

    def start(self) -> None:
        self.calls, self.probing, self._pointed = {}, True, {}
        self._data_ptr = data_ptr = torch.Tensor.data_ptr
        pointed = self._pointed

        def recorded(tensor: torch.Tensor) -> int:
            address = data_ptr(tensor)
            pointed[address] = tensor
            return address

        torch.Tensor.data_ptr = recorded  # type: ignore[method-assign,assignment]  # restored by stop()

    def stop(self) -> dict:
        self.probing = False
        if self._data_ptr is not None:
            torch.Tensor.data_ptr = self._data_ptr  # type: ignore[method-assign]  # the original, back
            self._data_ptr = None
        self._pointed = {}
        names = sorted(self.calls)[:_MAX_NAMES]
        return {"calls": sum(self.calls.values()), "kernels": [n[:200] for n in names]}

    def spoiled(self, name: str, fn: Callable, args: tuple, kwargs: dict):
        self.calls[name] = self.calls.get(name, 0) + 1
        given = list(_tensors((args, kwargs)))
        given += [self._pointed[a] for a in _addresses((args, kwargs)) if a in self._pointed]
        with torch.no_grad():
            before = [t.clone() for t in given]
        out = fn(*args, **kwargs)
        done: set[tuple[int, int]] = set()
        for t in _tensors(out):
            _spoil(t, done)
        for t, b in zip(given, before, strict=True):
            if not _same(t, b):
                _spoil(t, done)
        return out

    # ------------------------------------------------------------------ the wrappers

    def wrap(self, name: str, fn: Callable) -> Callable:
        if id(fn) in self._wrapped:
            return fn
        observer = self

        def call(*args, **kwargs):
            if not observer.probing:
                return fn(*args, **kwargs)
            return observer.spoiled(name, fn, args, kwargs)

        self._wrapped.add(id(call))
        return call

    def extension(self, module, label: str):
        """Wrap every function of a built extension module in place; return it."""
        for attr in dir(module):
            value = getattr(module, attr)
            if attr.startswith("_") or not callable(value) or isinstance(value, type):
                continue
            setattr(module, attr, self.wrap(f"{label}.{attr}", value))
        return module

    def operators(self, before: set[str]) -> None:
        """Wrap the operators a build registered (TORCH_LIBRARY): ``torch.ops.ns.op``."""
        for full in set(torch._C._dispatch_get_all_op_names()) - before:
            ns, _, op = full.partition("::")
            if not op or "." in op:
                continue
            namespace = getattr(torch.ops, ns)
            packet = getattr(namespace, op)
            setattr(namespace, op, _Operator(self, full, packet))

    def builder(self, build: Callable) -> Callable:
        observer = self

        @functools.wraps(build)
        def built(*args, **kwargs):
            ops = set(torch._C._dispatch_get_all_op_names())
            module = build(*args, **kwargs)
            observer.operators(ops)
            label = kwargs.get("name") or (args[0] if args else "extension")
            if module is not None and not isinstance(module, str):
                observer.extension(module, str(label))
            return module

        del built.__wrapped__  # the unwrapped builder is no business of the solution
        return built

    def triton_launches(self) -> None:
        """Count launches of Triton kernels the solution's own module defines (Autotuner and
        Heuristics launch through the same ``run``)."""
        try:
            from triton.runtime import interpreter, jit
        except ImportError:
            return
        for cls in (jit.JITFunction, interpreter.InterpretedFunction):
            cls.run = self._launch(cls.run)

    def _launch(self, run: Callable) -> Callable:
        observer = self

        def launch(kernel, *args, **kwargs):
            if not observer.probing:
                return run(kernel, *args, **kwargs)
            fn = getattr(kernel, "fn", None)
            if getattr(fn, "__module__", None) != CANDIDATE_MODULE or kwargs.get("warmup"):
                return run(kernel, *args, **kwargs)
            return observer.spoiled(fn.__name__, functools.partial(run, kernel), args, kwargs)

        return launch


class _Operator:
    """``torch.ops.ns.op`` for an operator the solution's build registered: counted and spoiled
    when called, directly or through an overload (``.default``)."""

    def __init__(self, observer: Observer, name: str, packet) -> None:
        self._observer, self._name, self._packet = observer, name, packet
        self._call = observer.wrap(name, packet)
        self._overloads: dict[str, Callable] = {}

    def __call__(self, *args, **kwargs):
        return self._call(*args, **kwargs)

    def __getattr__(self, attr: str):
        value = getattr(self._packet, attr)
        if not callable(value) or attr.startswith("_"):
            return value
        if attr not in self._overloads:
            self._overloads[attr] = self._observer.wrap(f"{self._name}.{attr}", value)
        return self._overloads[attr]


def install() -> Observer:
    """Put the wrappers in place (before the solution is imported)."""
    from torch.utils import cpp_extension

    observer = Observer()
    cpp_extension.load_inline = observer.builder(cpp_extension.load_inline)
    cpp_extension.load = observer.builder(cpp_extension.load)
    observer.triton_launches()
    return observer


def _tensors(value) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)


def _addresses(value) -> Iterator[int]:
    """The integers among a call's arguments (a ctypes pointer's too): candidate addresses."""
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _addresses(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _addresses(v)
    elif isinstance(getattr(value, "value", None), int):  # ctypes.c_void_p(t.data_ptr())
        yield value.value


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.is_floating_point() or a.is_complex():
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return torch.equal(a, b)


def _spoil(t: torch.Tensor, done: set[tuple[int, int]]) -> None:
    key = (t.data_ptr(), t.numel())
    if key in done or t.numel() == 0:
        return
    done.add(key)
    with torch.no_grad():
        if t.is_floating_point() or t.is_complex():
            t.fill_(float("nan"))
        elif t.dtype == torch.bool:
            t.logical_not_()
        else:
            t.bitwise_not_()
