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


def _channel_param(lowerer, node, module: nn.Module, name: str, spatial: int):
    """``module.<name>`` as a parameter node whose value is the ``(C, 1, ...)`` view."""
    from htam.offline.front.lower import CNode  # the node type (lower imports this module)

    tensor = getattr(module, name)
    shape = (-1, *[1] * spatial)
    path = f"{node.target}.{name}"
    return CNode("param", [], {"path": path}, tensor.detach().view(shape), f"{node.name}_{name}")


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
    weight = _channel_param(lowerer, node, m, "weight", spatial)
    scaled = lowerer.synth(node, "mul", [normed], {"other": weight}, shape)
    bias = _channel_param(lowerer, node, m, "bias", spatial)
    return lowerer._make(node, "add", [scaled], {"other": bias, "alpha": 1})


INSTANCE_NORMS: dict[type, Callable[..., Any]] = {cls: instance_norm for cls in _SPATIAL}
