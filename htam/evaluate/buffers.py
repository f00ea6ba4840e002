"""Tensors the judge owns and lends to a candidate: the candidate's inputs and the slots its
outputs are copied into. On the GPU they are plain device allocations shared through CUDA IPC
(the candidate maps the judge's memory; nothing travels through the host); on the CPU they are
memfd files whose descriptors travel beside a frame and are mapped on both sides.

The CUDA side uses the driver API directly (``cuMemAlloc``/``cuIpcGetMemHandle``/
``cuIpcOpenMemHandle``): torch's own IPC path keeps a reference counter in ``/dev/shm``, which a
candidate's private ``/dev/shm`` does not share. Tensors are wrapped through
``__cuda_array_interface__``.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import mmap
import os
import random
from dataclasses import dataclass

import torch

DTYPES = {
    str(d).removeprefix("torch."): d
    for d in (
        torch.float32,
        torch.float64,
        torch.float16,
        torch.bfloat16,
        torch.int64,
        torch.int32,
        torch.int16,
        torch.int8,
        torch.uint8,
        torch.bool,
        torch.complex64,
    )
}
_TYPESTR = {
    "float32": "<f4",
    "float64": "<f8",
    "float16": "<f2",
    "bfloat16": "<V2",  # no numpy type string: wrapped as raw bytes, then viewed
    "int64": "<i8",
    "int32": "<i4",
    "int16": "<i2",
    "int8": "|i1",
    "uint8": "|u1",
    "bool": "|b1",
    "complex64": "<c8",
}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _nbytes(shape: list[int], dtype: str) -> int:
    n = DTYPES[dtype].itemsize
    for s in shape:
        n *= s
    return n


# --------------------------------------------------------------------------- CUDA driver


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]  # CUipcMemHandle, passed by value to open


class _Driver:
    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.lib.cuIpcOpenMemHandle_v2.argtypes = [
            ctypes.POINTER(ctypes.c_uint64),
            _Handle,
            ctypes.c_uint,
        ]

    def call(self, name: str, *args) -> None:
        ret = getattr(self.lib, name)(*args)
        if ret != 0:
            raise RuntimeError(f"{name} failed with CUDA error {ret}")


_driver: _Driver | None = None


def _cuda() -> _Driver:
    global _driver
    if _driver is None:
        torch.empty(1, device="cuda")  # a current context on this thread
        _driver = _Driver()
    return _driver


class _CudaArray:
    """The minimal object ``torch.as_tensor`` needs to wrap device memory it does not own."""

    def __init__(self, ptr: int, shape: list[int], dtype: str):
        storage = "uint8" if dtype == "bfloat16" else dtype
        nbytes = _nbytes(shape, dtype)
        self.__cuda_array_interface__ = {
            "shape": (nbytes,) if dtype == "bfloat16" else tuple(shape),
            "typestr": _TYPESTR[storage] if dtype != "bfloat16" else "|u1",
            "data": (ptr, False),
            "version": 3,
            "strides": None,
        }


def _wrap_cuda(ptr: int, shape: list[int], dtype: str) -> torch.Tensor:
    t = torch.as_tensor(_CudaArray(ptr, shape, dtype), device="cuda")
    if dtype == "bfloat16":
        t = t.view(torch.bfloat16).view(shape)
    return t


# --------------------------------------------------------------------------- the judge's side


@dataclass
class Lent:
    """A buffer the judge owns: its tensor and what the candidate needs to map it."""

    tensor: torch.Tensor
    descriptor: dict
    fd: int | None = None  # CPU: the memfd to send beside the frame
    _ptr: int | None = None

    def free(self) -> None:
        if self._ptr is not None:
            _cuda().call("cuMemFree_v2", ctypes.c_uint64(self._ptr))
            self._ptr = None
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def lend(shape: list[int], dtype: str, device: str) -> Lent:
    nbytes = max(_nbytes(shape, dtype), 1)
    desc = {"shape": list(shape), "dtype": dtype, "nbytes": nbytes}
    if device == "cuda":
        drv = _cuda()
        ptr = ctypes.c_uint64()
        drv.call("cuMemAlloc_v2", ctypes.byref(ptr), ctypes.c_size_t(nbytes))
        handle = _Handle()
        drv.call("cuIpcGetMemHandle", ctypes.byref(handle), ptr)
        desc["handle"] = bytes(handle).hex()
        return Lent(_wrap_cuda(ptr.value, shape, dtype), desc, _ptr=ptr.value)
    fd = os.memfd_create("htam-buffer", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, nbytes)
    # Sealed: the candidate holds the descriptor too, and a shrunk file would fault the
    # judge's own mapping (SIGBUS).
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    return Lent(_map_cpu(fd, shape, dtype, nbytes), desc, fd=fd)


def _map_cpu(fd: int, shape: list[int], dtype: str, nbytes: int) -> torch.Tensor:
    mem = mmap.mmap(fd, nbytes)
    flat = torch.frombuffer(mem, dtype=torch.uint8, count=nbytes)
    return flat[: _nbytes(shape, dtype)].view(DTYPES[dtype]).view(shape)


# --------------------------------------------------------------------------- the candidate's side


def borrow(desc: dict, fd: int | None) -> torch.Tensor:
    """Map a buffer the judge lent (in the candidate's process, by trusted harness code)."""
    shape, dtype, nbytes = desc["shape"], desc["dtype"], desc["nbytes"]
    if "handle" in desc:
        drv = _cuda()
        ptr = ctypes.c_uint64()
        handle = _Handle.from_buffer_copy(bytes.fromhex(desc["handle"]))
        lazy_peer_access = 1
        drv.call("cuIpcOpenMemHandle_v2", ctypes.byref(ptr), handle, lazy_peer_access)
        return _wrap_cuda(ptr.value, shape, dtype)
    if fd is None:
        raise ValueError("a CPU buffer without its descriptor")
    return _map_cpu(fd, shape, dtype, nbytes)


# --------------------------------------------------------------------------- seals

_SEAL_CHUNK = 1 << 24  # elements per pass: the weights (int32) of one pass stay cached
_HASH_BLOCK = 1 << 18  # bytes the CPU's hash takes at a time, in the key's order
_weights: dict[str, torch.Tensor] = {}
_M64 = (1 << 64) - 1


def _seal_weights(n: int, device: torch.device) -> torch.Tensor:
    """Fixed pseudo-random int32 weights, the same on every process and device (integer
    arithmetic that wraps). Public, so the sum can be matched by a candidate that changes a few
    elements within the tolerance: on the GPU a known limit."""
    cached = _weights.get(str(device))
    if cached is None or cached.numel() < n:
        w = torch.arange(n, dtype=torch.int32, device=device) * 625341585 + 1013904223
        w ^= w >> 13
        w *= 1540483477
        w ^= w >> 15
        _weights[str(device)] = cached = w
    return cached[:n]


def seal(t: torch.Tensor, key: int) -> int:
    """A keyed checksum of every byte of ``t`` in logical order, computed where ``t`` lives: the
    harness seals each output as the call returned it, and the judge seals the slot it was handed
    over into, so an output something else wrote (a thread, a stream the candidate left running)
    after the call returned cannot pass for the call's. On the CPU it is SHA-256 (1.4 GB/s here,
    four times the weighted sum): a weighted sum with known weights can be matched by changing a
    few elements within the tolerance. On the GPU it is the weighted sum, on the
    device (hashing there would mean copying every output to the host)."""
    # (a lazy conjugate or negation is resolved first: the slot's copy resolves it too)
    raw = t.detach().resolve_conj().resolve_neg().contiguous().reshape(-1).view(torch.uint8)
    return (_hash_seal if raw.device.type == "cpu" else _sum_seal)(raw, key)


def _hash_seal(raw: torch.Tensor, key: int) -> int:
    """SHA-256 of the bytes, block by block in an order drawn from ``key``: a thread left
    writing the output front to back stayed ahead of a hash in order (SHA-256 is slower than a
    memory-bound kernel) and finished unseen while the call's output was sealed, 2x on a ReLU;
    in a secret order the hash reads blocks it has not written yet."""
    digest = hashlib.sha256(key.to_bytes(8, "little"))
    data = _bytes_of(raw)
    blocks = list(range(0, len(data), _HASH_BLOCK))
    random.Random(key).shuffle(blocks)
    for start in blocks:
        digest.update(data[start : start + _HASH_BLOCK])
    return int.from_bytes(digest.digest()[:8], "little")


def _bytes_of(raw: torch.Tensor) -> memoryview:
    """The bytes of a contiguous CPU uint8 tensor, shared, not copied. Not ``raw.numpy()``:
    that marks the storage as one that can never be resized, and the harness renews each
    output's storage once it has handed it over (a buffer kept across calls meets fresh pages)."""
    if raw.numel() == 0:
        return memoryview(b"")
    return memoryview((ctypes.c_ubyte * raw.numel()).from_address(raw.data_ptr())).cast("B")


def _sum_seal(raw: torch.Tensor, key: int) -> int:
    words = raw  # as bytes, or as words (from a copy where they start off a word boundary)
    if raw.numel() % 4 == 0:
        words = (raw if raw.storage_offset() % 4 == 0 else raw.clone()).view(torch.int32)
    total = words.numel()
    for k, start in enumerate(range(0, words.numel(), _SEAL_CHUNK)):
        part = words[start : start + _SEAL_CHUNK].to(torch.int32)
        s = int((part * _seal_weights(part.numel(), part.device)).sum())
        mix = (((key + (k + 1) * 0x9E3779B97F4A7C15) & _M64) * 0xBF58476D1CE4E5B9 & _M64) | 1
        total = (total + s * mix) & _M64
    return total


def changed(slots: list[torch.Tensor], key: int, seals: list[int]) -> int | None:
    """The first slot whose bytes are not the ones sealed (with ``key``), or None."""
    for k, (slot, expected) in enumerate(zip(slots, seals, strict=True)):
        if seal(slot, key) != expected:
            return k
    return None
