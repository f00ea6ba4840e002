"""``nn.InstanceNorm1d/2d/3d`` with a per-channel affine, as canonical nodes: a weightless layer
norm over the spatial dims (each (sample, channel) a row), then ``* weight`` and ``+ bias``
seen as ``(C, 1, ...)``, a per-row epilogue the row template fuses. Without the affine the
module lowers in :mod:`htam.offline.front.modules` (the layer norm alone)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn

from htam.offline.front.trace import NoMatch

_SPATIAL: dict[type, int] = {nn.InstanceNorm1d: 1, nn.InstanceNorm2d: 2, nn.InstanceNorm3d: 3}


def instance_norm(lowerer, node, module: nn.Module) -> Any:
    """The module's call as layer norm (+ affine epilogue); NoMatch where it reads running
    statistics (eval mode with ``track_running_stats``) or is called with more than its input."""
    spatial = _SPATIAL[type(module)]
    m: Any = module
    if m.track_running_stats and not m.training:
        raise NoMatch(f"{type(m).__name__} with running statistics (eval mode) ({node.target})")
    if len(node.args) != 1 or node.kwargs:
        raise NoMatch(f"{type(m).__name__} called with more than its input ({node.target})")
    x = lowerer._arg(node.args[0])
    value = lowerer.traced.values.get(node)
    if not isinstance(value, torch.Tensor):
        raise NoMatch(f"{type(m).__name__} ({node.target}) does not produce a tensor")
    attrs = {"normalized_shape": (0,) * spatial, "eps": m.eps, "weight": None, "bias": None}
    if not m.affine:
        return lowerer._make(node, "layer_norm", [x], attrs)
    shape = tuple(value.shape)
    normed = lowerer.synth(node, "layer_norm", [x], attrs, shape)
    weight = lowerer.channel_param(node, "weight", m.weight.detach(), spatial)
    scaled = lowerer.synth(node, "mul", [normed], {"other": weight}, shape)
    bias = lowerer.channel_param(node, "bias", m.bias.detach(), spatial)
    return lowerer._make(node, "add", [scaled], {"other": bias, "alpha": 1})


INSTANCE_NORMS: dict[type, Callable[..., Any]] = {cls: instance_norm for cls in _SPATIAL}
