"""The KernelBench source form the offline tests write their reference models in."""

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def kb(body: str, inputs: str, init: str = "[]") -> str:
    """A KernelBench source: the imports, ``body`` (constants and Model), and the two input
    functions returning ``inputs`` and ``init``."""
    return (
        f"{HEAD}{body}\ndef get_inputs():\n    return {inputs}\n\n"
        f"def get_init_inputs():\n    return {init}\n"
    )
