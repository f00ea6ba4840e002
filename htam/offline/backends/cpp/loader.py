"""The Python side of a C++ solution: its imports, and the module-level code that writes the
C++ source into torch's extension directory and builds it (compiler flags per family)."""

from __future__ import annotations

IMPORTS = """import math
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load
"""

CPP_FLAGS = ["-O3", "-fopenmp", "-march=native"]
# For elementwise chains -ffast-math lets GCC call glibc's vector math (expf, tanhf, ...) inside
# vectorized loops: a 3x difference on the CPU, with rounding far inside the tolerances. Rows too:
# their sums vectorize once reassociation is allowed (a softmax of 4096 x 8192: 0.23x eager to
# 0.55x, a loaded machine). Not GEMM, whose blocking is already vectorized. Infinities stay
# (-fno-finite-math-only): assumed away, x * sigmoid(x) gave NaN, clamped to -1, where expf
# overflows (x below -88; the quickstart's best.py). glibc declares its vector math
# only under __FAST_MATH__, which that flag leaves undefined: defined by hand, the loops stay
# vectorized (15.7 ms against 63.7 ms without it, 14.4 ms finite-only, 16M floats here).
FAST_MATH_FAMILIES = ("elementwise", "row")
FAST_MATH = ["-ffast-math", "-fno-finite-math-only", "-D__FAST_MATH__"]


def cpp_flags(family: str) -> list[str]:
    return CPP_FLAGS + (FAST_MATH if family in FAST_MATH_FAMILIES else [])


# The solution writes its C++ into torch's extension directory and builds it there with
# torch.utils.cpp_extension.load (torch's compiler flags, ninja, a lock against concurrent
# builds). TORCH_EXTENSIONS_DIR is the job's own directory under the evaluator; otherwise the
# build goes under HTAM_CACHE_DIR, never into the installed torch package.
_CPP_LOADER = '''
CPP_SRC = r"""
{src}
"""


def _source_file(name, text):
    """(build directory, C++ file); the file is rewritten only when it differs, so an unchanged
    extension is not built again."""
    root = os.environ.get("TORCH_EXTENSIONS_DIR") or os.path.join(
        os.environ.get("HTAM_CACHE_DIR") or os.path.expanduser("~/.cache/htam"), "extensions"
    )
    directory = os.path.join(root, name)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name + ".cpp")
    old = None
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
    if old != text:
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
    return directory, path


_build_dir, _source = _source_file("{fn}", CPP_SRC)
_ext = load(
    name="{fn}",
    sources=[_source],
    build_directory=_build_dir,
    extra_cflags=[{flags}],
    extra_ldflags=["-fopenmp"],
)
'''


def cpp_loader(fn: str, src: str, family: str) -> str:
    flags = ", ".join(repr(f) for f in cpp_flags(family))
    return _CPP_LOADER.format(src=src.strip(), fn=fn, flags=flags)
