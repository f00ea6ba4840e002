"""Red team 12: the job directory's host path (from mountinfo) and what its siblings hold: the
reference runner's job directory, other evaluations' (another candidate's code, its builds)."""

import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ext = load_inline("rt12_siblings", cpp_sources=r"""
torch::Tensor relu(torch::Tensor x) { return torch::relu(x); }
""", functions=["relu"])

host = None
for line in open("/proc/self/mountinfo"):
    parts = line.split()
    if parts[4] == "/tmp/job":
        host = parts[3]
        print("job dir on the host:", line.strip())
if host:
    parent = os.path.dirname(host)
    for root in (parent, os.path.dirname(parent)):
        print("listing", root, os.path.isdir(root))
        if os.path.isdir(root):
            for name in sorted(os.listdir(root))[:40]:
                p = os.path.join(root, name)
                print("  ", name, oct(os.stat(p).st_mode), os.stat(p).st_uid)
    for dirpath, _dirs, files in os.walk(parent):
        for f in files:
            p = os.path.join(dirpath, f)
            if os.access(p, os.R_OK) and f.endswith((".py", ".log", ".json")):
                print("READABLE", p, os.path.getsize(p))


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu(x)
