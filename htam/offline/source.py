"""Stage 6 of the pipeline: a complete, self-contained KernelBench solution file (``ModelNew``)
around a backend's code: the ``# htam-offline:`` header, the imports, the helpers the code
calls, the backend's module-level setup and kernels, then ``ModelNew`` (the reference's
``__init__``, and ``forward``: the library prelude, then the backend's lines)."""

from __future__ import annotations

from htam.offline.backends.base import KernelCode
from htam.offline.guard import CHECK_HELPER, check_call
from htam.offline.ir.model import Match
from htam.offline.params import Params, header

# Helpers by name: a generated file holds only those its code calls.
_HELPERS = {
    "_attr": '''
def _attr(obj, path):
    """A parameter or buffer of the module by its dotted path."""
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj
''',
    "_checked_inputs": CHECK_HELPER,
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
    "_conv_nobias": '''
def _conv_nobias(m, x):
    """The convolution module ``m`` on ``x`` without its bias, which the kernel adds: torch
    would add it in a pass of its own over the result."""
    if isinstance(m, nn.modules.conv._ConvTransposeNd):
        fn = getattr(torch.nn.functional, f"conv_transpose{len(m.kernel_size)}d")
        return fn(x, m.weight, None, m.stride, m.padding, m.output_padding, m.groups, m.dilation)
    return m._conv_forward(x, m.weight, None)
''',
    "_channels_last_weights": '''
def _channels_last_weights(module):
    """Convolution weights in channels-last memory, once: the library then runs each
    convolution channels-last and writes its result so (same values, another order)."""
    for m in module.modules():
        if isinstance(m, nn.modules.conv._ConvNd) and m.weight.dim() in (4, 5):
            fmt = torch.channels_last if m.weight.dim() == 4 else torch.channels_last_3d
            m.weight.data = m.weight.data.contiguous(memory_format=fmt)
''',
}


def attr_buffer_lines(names: tuple[str, ...]) -> list[str]:
    """``__init__`` lines: each float attribute the kernels read, as a one-element buffer
    (not saved with the parameters; moved with the module to its device)."""
    return [
        f"self.register_buffer('_htam_{n}', torch.tensor([float(self.{n})]), persistent=False)"
        for n in names
    ]


def solution_file(
    match: Match, language: str, params: Params, applied: list[str], code: KernelCode
) -> str:
    """The solution file for ``match`` written by ``language``'s backend with ``params``."""
    head = header(match.family, language, params, applied)
    doc = (
        f'"""HTAM offline proposer ({language}): {match.family} template.\n\n'
        f"Pattern: {match.summary}.\n"
        f"Strategies applied: {', '.join(applied) or 'none (baseline)'}.\n"
        '"""'
    )
    body = ["\n" + k + "\n" for k in code.kernels]
    body.append("\nclass ModelNew(nn.Module):")
    body.append(match.init_source or "    pass")
    if match.init_source and match.scalars:
        body.append(f"        _specialized(self, {match.scalars!r})")
    body += ["        " + line for line in attr_buffer_lines(match.attr_buffers)]
    body += ["        " + line for line in code.init]
    signature = ", ".join(["self", *match.inputs])
    body.append(f"\n    def forward({signature}):")
    body.append("        " + check_call(match.inputs, match.input_checks, language))
    prelude = [line for line in match.prelude if line.split(" = ")[0] not in code.replaced]
    forward = [*code.pre, *prelude, *code.forward]  # the library prefix (torch) between
    body += ["        " + line if line else "" for line in forward]
    helpers = [h for name, h in _HELPERS.items() if f"{name}(" in "\n".join(body)]
    imports = code.imports
    if not any("math." in text for text in (*helpers, *body)):
        imports = imports.replace("import math\n\n", "").replace("import math\n", "")
    parts = [head, doc, "", imports]
    if match.preamble:  # what __init__ needs, less the imports the template has already
        have = set(imports.splitlines())
        extra = [line for line in match.preamble.splitlines() if line not in have]
        if any(line.strip() for line in extra):
            parts.append("\n".join(extra).strip() + "\n")
    parts += helpers
    if code.setup:
        parts.append(code.setup)
    return "\n".join(parts + body) + "\n"
