"""Each KernelBench task's tensor bytes (inputs, outputs, parameters) at its own size, found on
the meta device (no memory is allocated, nothing is computed): the ranking the GPU memory check
(scripts/device/gpu_memory.py) takes its largest tasks from.

    python3 scripts/device/kb_tensor_bytes.py [N]    prints the N largest (default 10)
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/, for kb_common
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kb_common import kb_paths  # noqa: E402

from htam.tasks.module import load_task_module  # noqa: E402


def tensor_bytes(path: Path) -> int | None:
    """Inputs + outputs + parameters of one call, or None when it cannot run on meta."""
    try:
        module = load_task_module(path.read_text(), "large", name="htam_meta_task")
        with torch.device("meta"):
            torch.manual_seed(0)
            model = module.Model(*module.get_init_inputs())
            inputs = module.get_inputs()
            with torch.no_grad():
                out = model(*inputs)
    except Exception:  # noqa: BLE001 - an op without a meta kernel: not ranked
        return None
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    tensors = [t for t in inputs + outs if isinstance(t, torch.Tensor)]
    if isinstance(model, torch.nn.Module):
        tensors += list(model.parameters()) + list(model.buffers())
    return sum(t.numel() * t.element_size() for t in tensors)


def ranking(levels=(1, 2, 3)) -> list[tuple[int, Path]]:
    sized = [(b, p) for p in kb_paths(levels) if (b := tensor_bytes(p)) is not None]
    return sorted(sized, key=lambda bp: -bp[0])


if __name__ == "__main__":
    top = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    ranked = ranking()
    for b, p in ranked[:top]:
        print(f"{b / 2**30:8.2f} GiB  {p.parent.name}/{p.stem}")
    print(f"({len(ranked)} tasks ranked)")
