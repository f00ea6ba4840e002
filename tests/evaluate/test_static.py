"""The static rules on source text: what counts as building a kernel."""

import pytest

from htam.evaluate.static import check_source

HEAD = "import torch\nimport torch.nn as nn\n"
MODEL = """
class ModelNew(nn.Module):
    def forward(self, x):
        ext.run(x)
        return x
"""


@pytest.mark.parametrize(
    ("build", "kernel"),
    [
        (
            "from torch.utils.cpp_extension import load\next = load(name='e', sources=['e.cpp'])",
            True,
        ),
        (
            "from torch.utils.cpp_extension import load as build\next = build(name='e', sources=[])",
            True,
        ),
        (
            "import torch.utils.cpp_extension as ce\next = ce.load_inline(name='e', cpp_sources='')",
            True,
        ),
        ("ext = torch.utils.cpp_extension.load(name='e', sources=['e.cpp'])", True),
        # loading something that is not an extension builds no kernel
        ("import io, json\next = json.load(io.StringIO('{}'))", False),
        ("ext = torch.load('weights.pt')", False),
        ("from json import load\next = load(open('x'))", False),
    ],
)
def test_only_cpp_extension_builds_count_as_a_kernel(build, kernel):
    found = {v.rule for v in check_source(HEAD + build + MODEL, "cpp")}
    assert ("no-kernel" not in found) is kernel, found
