"""Environment of the offline tests, set before triton or a C++ build is used.

The Triton path runs in the interpreter when there is no GPU. C++ builds go under the test
session's cache (tests/conftest.py: HTAM_TEST_CACHE_DIR keeps one across sessions), not ~/.cache.
"""

import os
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"


@pytest.fixture(scope="session", autouse=True)
def _extensions_in_the_test_cache():
    # A fixture, not import-time code: HTAM_CACHE_DIR is set by the root conftest's configure.
    if "TORCH_EXTENSIONS_DIR" in os.environ or "HTAM_CACHE_DIR" not in os.environ:
        yield
        return
    os.environ["TORCH_EXTENSIONS_DIR"] = str(
        Path(os.environ["HTAM_CACHE_DIR"]) / "torch_extensions"
    )
    yield
    del os.environ["TORCH_EXTENSIONS_DIR"]
