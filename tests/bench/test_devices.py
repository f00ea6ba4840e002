"""Worker devices: --gpus maps through the parent's CUDA_VISIBLE_DEVICES, and each worker's
environment pins one GPU and keeps NVLink multicast off."""

import pytest
import typer

from htam.bench.local_worker import device_env
from htam.cli.workers import gpu_devices


def test_gpus_are_indices_into_the_visible_ones(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert gpu_devices("all") == ["cuda:2", "cuda:3"]
    assert gpu_devices("1") == ["cuda:3"]
    assert gpu_devices("1,0") == ["cuda:3", "cuda:2"]
    with pytest.raises(typer.Exit):
        gpu_devices("2")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(typer.Exit):
        gpu_devices("all")


def test_worker_env_pins_one_gpu_and_keeps_multicast_off():
    env = device_env("cuda", "cuda:3")
    assert env == {"CUDA_VISIBLE_DEVICES": "3", "NCCL_NVLS_ENABLE": "0",
                   "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
    assert "CUDA_VISIBLE_DEVICES" not in device_env("cpu", "cpu1")
