import os
import sys
import tempfile

import pytest

# At import, not in pytest_configure: pytest imports the conftest of every folder named on its
# command line before configuring, and tests/tasks/conftest.py imports Triton (through htam.tasks),
# so `pytest tests/tasks tests/offline/test_rows_coop.py` ran the coop tests without the
# interpreter's patches and failed, where `pytest` alone passed.
if not os.path.exists("/dev/nvidiactl"):
    os.environ.setdefault("TRITON_INTERPRET", "1")


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


def pytest_configure(config):
    """Keep the caches of a test session out of the user's home (HTAM_TEST_CACHE_DIR reuses
    one across sessions, e.g. to keep compiled extensions). (Without a GPU, Triton runs under its
    interpreter, chosen above at import, before anything imports Triton: Triton decides at import
    whether its own library functions (tl.sum, tl.sigmoid, ...) are interpreted.) The CLI's rich
    consoles get one fixed width, so no test depends on the caller's terminal or COLUMNS."""
    os.environ["COLUMNS"] = "120"
    if "HTAM_TEST_CACHE_DIR" in os.environ:
        os.environ["HTAM_CACHE_DIR"] = os.environ["HTAM_TEST_CACHE_DIR"]
    else:
        os.environ["HTAM_CACHE_DIR"] = tempfile.mkdtemp(prefix="htam-test-cache-")


@pytest.fixture
def default_recursion_limit():
    """Python's default recursion limit for the test: torch's compiler raises it for the whole
    process once imported (to 10,000 and more), and a test of what happens past the limit must
    not depend on which tests ran before it."""
    saved = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        yield
    finally:
        sys.setrecursionlimit(saved)
