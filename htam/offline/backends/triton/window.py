"""Index code the sliding-window kernels (convolution, pooling) share: an output laid out
``(..., OD, OH, OW)`` (1-d and 2-d windows have leading sizes of one), one element per lane."""

from __future__ import annotations


def split_output_index(flat: str, rest: str, indent: str = "    ") -> str:
    """Kernel lines splitting the flat output index ``flat`` into the window position ``od``,
    ``oh``, ``ow`` and ``rest``, the index over the dims before them (batch, channels)."""
    lines = [
        f"ow = {flat} % OW",
        f"t = {flat} // OW",
        "oh = t % OH",
        "t = t // OH",
        "od = t % OD",
        f"{rest} = t // OD",
    ]
    return "\n".join(indent + line for line in lines)
