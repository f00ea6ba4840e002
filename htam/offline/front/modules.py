"""Canonical form of ``nn.Module`` calls: the operation, its attributes and its parameters."""

from __future__ import annotations

from typing import Any

import torch.nn as nn

from htam.offline.front.missing import family_note
from htam.offline.front.trace import NoMatch

# Modules without attributes, by canonical op.
_PLAIN: list[tuple[type, str]] = [
    (nn.ReLU, "relu"),
    (nn.Sigmoid, "sigmoid"),
    (nn.Tanh, "tanh"),
    (nn.SiLU, "silu"),
    (nn.Mish, "mish"),
    (nn.Hardsigmoid, "hardsigmoid"),
    (nn.Hardswish, "hardswish"),
    (nn.Softsign, "softsign"),
    (nn.LogSigmoid, "logsigmoid"),
    (nn.SELU, "selu"),
    (nn.Identity, "identity"),
]

Lowered = tuple[str, dict[str, Any], dict[str, str | None]]


def lower_module(module: nn.Module, path: str) -> Lowered:
    """(op, attrs, parameter paths by role) for one module call; NoMatch when unsupported."""
    for cls, op in _PLAIN:
        if type(module) is cls:
            return op, {}, {}
    lowered = _with_attributes(module, path)
    if lowered is None:
        name = type(module).__name__
        raise NoMatch(f"unsupported module {name} ({path}){family_note(name)}")
    return lowered


def _param(module: nn.Module, path: str, name: str) -> str | None:
    return f"{path}.{name}" if getattr(module, name, None) is not None else None


def _with_attributes(m: nn.Module, path: str) -> Lowered | None:
    if isinstance(m, nn.GELU):
        return "gelu", {"approximate": m.approximate}, {}
    if isinstance(m, nn.LeakyReLU):
        return "leaky_relu", {"negative_slope": m.negative_slope}, {}
    if isinstance(m, (nn.ELU, nn.CELU)):
        return "elu", {"alpha": m.alpha}, {}
    if isinstance(m, nn.Hardtanh):  # includes ReLU6
        return "hardtanh", {"min_val": m.min_val, "max_val": m.max_val}, {}
    if isinstance(m, nn.Softplus):
        return "softplus", {"beta": m.beta, "threshold": m.threshold}, {}
    if isinstance(m, (nn.Softmax, nn.LogSoftmax)):
        if m.dim is None:
            raise NoMatch(
                f"{type(m).__name__}() without dim ({path}): the implicit dim is deprecated"
            )
        return ("softmax" if isinstance(m, nn.Softmax) else "log_softmax"), {"dim": m.dim}, {}
    if isinstance(m, nn.Dropout):
        return "dropout", {"p": m.p, "training": m.training}, {}
    if isinstance(m, nn.LayerNorm):
        attrs = {"normalized_shape": tuple(m.normalized_shape), "eps": m.eps}
        return (
            "layer_norm",
            attrs,
            {"weight": _param(m, path, "weight"), "bias": _param(m, path, "bias")},
        )
    if isinstance(m, nn.modules.instancenorm._InstanceNorm):
        return _instance_norm(m, path)
    if isinstance(m, nn.RMSNorm):
        attrs = {"normalized_shape": tuple(m.normalized_shape), "eps": m.eps}
        return "rms_norm", attrs, {"weight": _param(m, path, "weight")}
    if isinstance(m, nn.modules.pooling._MaxPoolNd | nn.modules.pooling._AvgPoolNd):
        return _pool(m, path)
    if isinstance(m, nn.modules.pooling._AdaptiveMaxPoolNd | nn.modules.pooling._AdaptiveAvgPoolNd):
        return _pool(m, path, adaptive=True)
    if isinstance(m, nn.modules.conv._ConvNd):
        return _conv(m, path)
    if type(m) is nn.TripletMarginLoss:  # margin read from the module at every call
        attrs = {"path": path, "p": m.p, "eps": m.eps, "swap": m.swap, "reduction": m.reduction}
        return "triplet_margin_loss", attrs, {}
    if isinstance(m, nn.modules.batchnorm._BatchNorm | nn.GroupNorm):
        if type(m) not in (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.GroupNorm):
            return None
        return (
            ("batch_norm" if isinstance(m, nn.modules.batchnorm._BatchNorm) else "group_norm"),
            {"path": path},
            {},
        )
    if type(m) in (nn.PixelShuffle, nn.PixelUnshuffle):  # the factor: a plain constructor int
        up = isinstance(m, nn.PixelShuffle)
        key = "upscale_factor" if up else "downscale_factor"
        return ("pixel_shuffle" if up else "pixel_unshuffle"), {key: getattr(m, key)}, {}
    if isinstance(m, nn.Linear):
        return "linear", {}, {"weight": f"{path}.weight", "bias": _param(m, path, "bias")}
    return None


def _instance_norm(m: nn.Module, path: str) -> Lowered:
    """InstanceNorm{1,2,3}d normalizes each (sample, channel) over its spatial dims: a layer norm
    over the trailing 1-3 dims without weights (only the count of dims is used, never sizes)."""
    uses_running = m.track_running_stats and not m.training
    if m.affine or uses_running:
        why = "a per-channel affine" if m.affine else "running statistics (eval mode)"
        raise NoMatch(f"{type(m).__name__} with {why} ({path})")
    spatial = {"InstanceNorm1d": 1, "InstanceNorm2d": 2, "InstanceNorm3d": 3}.get(type(m).__name__)
    if spatial is None:
        name = type(m).__name__
        raise NoMatch(f"unsupported module {name} ({path}){family_note(name)}")
    attrs = {"normalized_shape": (0,) * spatial, "eps": m.eps}
    return "layer_norm", attrs, {"weight": None, "bias": None}


def _pool(m: nn.Module, path: str, adaptive: bool = False) -> Lowered:
    """A pooling module: its window (or an adaptive one's output size) stays the module's (read
    at every call by the kernel's forward), so only the kind and the number of spatial dims are
    kept here."""
    nd = int(type(m).__name__[-2])
    if getattr(m, "return_indices", False):
        raise NoMatch(f"{type(m).__name__} with return_indices=True ({path})")
    maxes = nn.modules.pooling._MaxPoolNd | nn.modules.pooling._AdaptiveMaxPoolNd
    kind = "max" if isinstance(m, maxes) else "avg"
    return f"{kind}_pool", {"nd": nd, "path": path, "adaptive": adaptive}, {}


_CONVS = ("Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d")


def _conv(m: nn.Module, path: str) -> Lowered | None:
    """A convolution module: its window, groups, weight and bias stay the module's (read at
    every call by the kernel's forward); zero padding only, given as sizes (or "valid")."""
    name = type(m).__name__
    if name not in _CONVS:
        return None
    if m.padding_mode != "zeros" or m.padding == "same":
        why = "padding='same'" if m.padding == "same" else f"padding_mode={m.padding_mode!r}"
        raise NoMatch(f"{name} with {why} ({path}){family_note(name)}")
    attrs = {"nd": int(name[-2]), "transposed": name.startswith("ConvTranspose"), "path": path}
    return "conv", attrs, {}
