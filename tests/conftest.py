import os

import pytest


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the GPU machine with -m gpu)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    """Keep caches of every test run out of the user's home."""
    cache = tmp_path_factory.getbasetemp() / "htam-cache"
    monkeypatch.setenv("HTAM_CACHE_DIR", os.environ.get("HTAM_TEST_CACHE_DIR", str(cache)))
