"""Assemble a complete, self-contained KernelBench solution file (``ModelNew``)."""

from __future__ import annotations

from htam.offline.ir.model import Match
from htam.offline.params import header

CPP_FLAGS = ["-O3", "-fopenmp", "-march=native"]
# For elementwise chains -ffast-math lets GCC call glibc's vector math (expf, tanhf, ...) inside
# vectorized loops: a 3x difference on the CPU, with rounding far inside the tolerances. Not for
# the other families: their masked tails rely on IEEE NaN/inf behaviour.
FAST_MATH_FAMILIES = ("elementwise",)


def cpp_flags(family: str) -> list[str]:
    return CPP_FLAGS + (["-ffast-math"] if family in FAST_MATH_FAMILIES else [])


# Helpers by name: a generated file holds only those its code calls.
_HELPERS = {
    "_attr": '''
def _attr(obj, path):
    """A parameter or buffer of the module by its dotted path."""
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj
''',
    "_inner": '''
def _inner(shape, tail):
    """Number of elements spanned by the last ``tail`` dims of ``shape``."""
    return math.prod(shape[len(shape) - tail:]) if tail else 1
''',
    "_specialized": '''
def _specialized(module, values):
    """The kernels compute with these constructor values compiled in: other values fail here
    rather than give wrong results."""
    for name, value in values.items():
        if getattr(module, name) != value:
            raise ValueError(
                f"this ModelNew is specialized for {name}={value!r}, not "
                f"{getattr(module, name)!r}: optimize the task with these init inputs"
            )
''',
}

_TRITON_IMPORTS = """import math

import torch
import torch.nn as nn
import triton
import triton.language as tl
"""

_CPP_IMPORTS = """import math
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load
"""


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


def _cpp_loader(fn: str, src: str, family: str) -> str:
    flags = ", ".join(repr(f) for f in cpp_flags(family))
    return _CPP_LOADER.format(src=src.strip(), fn=fn, flags=flags)


def render(
    match: Match,
    language: str,
    params: dict,
    applied: list[str],
    kernels: list[str],
    forward: list[str],
    cpp: tuple[str, str] | None = None,
) -> str:
    """The solution file. ``cpp`` is (function name, source) for the C++ path."""
    head = header(match.family, language, params, applied)
    doc = (
        f'"""HTAM offline proposer ({language}): {match.family} template.\n\n'
        f"Pattern: {match.summary}.\n"
        f"Strategies applied: {', '.join(applied) or 'none (baseline)'}.\n"
        '"""'
    )
    body = ["\n" + k + "\n" for k in kernels]
    body.append("\nclass ModelNew(nn.Module):")
    body.append(match.init_source or "    pass")
    if match.init_source and match.scalars:
        body.append(f"        _specialized(self, {match.scalars!r})")
    signature = ", ".join(["self", *match.inputs])
    body.append(f"\n    def forward({signature}):")
    body += ["        " + line if line else "" for line in forward]
    helpers = [h for name, h in _HELPERS.items() if f"{name}(" in "\n".join(body)]
    imports = _CPP_IMPORTS if cpp else _TRITON_IMPORTS
    if not any("math." in text for text in (*helpers, *body)):
        imports = imports.replace("import math\n\n", "").replace("import math\n", "")
    parts = [head, doc, "", imports]
    if match.preamble:  # what __init__ needs, less the imports the template has already
        have = set(imports.splitlines())
        extra = [line for line in match.preamble.splitlines() if line not in have]
        if any(line.strip() for line in extra):
            parts.append("\n".join(extra).strip() + "\n")
    parts += helpers
    if cpp:
        parts.append(_cpp_loader(*cpp, match.family))
    return "\n".join(parts + body) + "\n"
