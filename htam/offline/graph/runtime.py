"""The kernel-backed modules and functions a rewritten model calls (language independent).

They sit in the solution file after a backend's primitives (:mod:`.triton_rt`, :mod:`.cpp_rt`)
and before the model's own classes. Every module subclasses the torch module it replaces, with
its constructor untouched, so parameters, buffers, their order and their initial values (the
RNG draws) are the reference's, and constructor values (an eps, a slope, ``inplace``) are read
from the instance at run time: the kernels take them as arguments.

- activations (``_KReLU``..., ``_f_relu``...): one elementwise kernel;
- batch norm (``_KBatchNorm2d``...): the batch's moments by a kernel as the reference computes
  them in training mode (running statistics updated alike), then one normalize-scale-shift kernel,
  into which a following activation is fused;
- a convolution or linear layer followed by an activation (in a ``_KSeq`` or
  ``_f_relu(self.fc(x))``): the library call without its bias, then one bias + activation kernel;
- softmax, log-softmax, layer norm: one row kernel.
"""

RUNTIME = '''
# activation kinds (the primitives' KIND): 1 relu, 2 sigmoid, 3 tanh, 4 gelu, 5 gelu (tanh),
# 6 silu, 7 clamp (hardtanh, relu6), 8 leaky relu, 9 exp; 0 none

def _spec(m):
    """(kind, lo, hi) of an activation module, None for any other module."""
    if isinstance(m, nn.ReLU):
        return (1, 0.0, 0.0)
    if isinstance(m, nn.Hardtanh):  # ReLU6 too
        return (7, m.min_val, m.max_val)
    if isinstance(m, nn.Sigmoid):
        return (2, 0.0, 0.0)
    if isinstance(m, nn.Tanh):
        return (3, 0.0, 0.0)
    if isinstance(m, nn.GELU):
        return (5 if m.approximate == "tanh" else 4, 0.0, 0.0)
    if isinstance(m, nn.SiLU):
        return (6, 0.0, 0.0)
    if isinstance(m, nn.LeakyReLU):
        return (8, m.negative_slope, 0.0)
    return None


class _KReLU(nn.ReLU):
    def forward(self, x):
        return _act(x, _spec(self), self.inplace)


class _KReLU6(nn.ReLU6):
    def forward(self, x):
        return _act(x, _spec(self), self.inplace)


class _KHardtanh(nn.Hardtanh):
    def forward(self, x):
        return _act(x, _spec(self), self.inplace)


class _KSigmoid(nn.Sigmoid):
    def forward(self, x):
        return _act(x, _spec(self))


class _KTanh(nn.Tanh):
    def forward(self, x):
        return _act(x, _spec(self))


class _KGELU(nn.GELU):
    def forward(self, x):
        return _act(x, _spec(self))


class _KSiLU(nn.SiLU):
    def forward(self, x):
        return _act(x, _spec(self), self.inplace)


class _KLeakyReLU(nn.LeakyReLU):
    def forward(self, x):
        return _act(x, _spec(self), self.inplace)


def _f_relu(x, inplace=False):
    return _act(x, (1, 0.0, 0.0), inplace)


def _f_relu6(x, inplace=False):
    return _act(x, (7, 0.0, 6.0), inplace)


def _f_sigmoid(x):
    return _act(x, (2, 0.0, 0.0))


def _f_tanh(x):
    return _act(x, (3, 0.0, 0.0))


def _f_gelu(x, approximate="none"):
    return _act(x, (5 if approximate == "tanh" else 4, 0.0, 0.0))


def _f_silu(x, inplace=False):
    return _act(x, (6, 0.0, 0.0), inplace)


def _f_leaky_relu(x, negative_slope=0.01, inplace=False):
    return _act(x, (8, negative_slope, 0.0), inplace)


def _f_hardtanh(x, min_val=-1.0, max_val=1.0, inplace=False):
    return _act(x, (7, min_val, max_val), inplace)


def _f_exp(x):
    return _act(x, (9, 0.0, 0.0))


def _f_softmax(x, dim=None, dtype=None):
    return _along(x, -1 if dim is None else dim, 0)


def _f_log_softmax(x, dim=None, dtype=None):
    return _along(x, -1 if dim is None else dim, 1)


def _along(x, dim, mode):
    """A row kernel over dim ``dim`` (moved last, and back)."""
    dim = dim % x.dim() if x.dim() else 0
    if dim == x.dim() - 1 or x.dim() == 0:
        return _rows(x, mode)
    return _rows(x.movedim(dim, -1), mode).movedim(-1, dim)


class _KSoftmax(nn.Softmax):
    def forward(self, x):
        return _along(x, -1 if self.dim is None else self.dim, 0)


class _KLogSoftmax(nn.LogSoftmax):
    def forward(self, x):
        return _along(x, -1 if self.dim is None else self.dim, 1)


class _KLayerNorm(nn.LayerNorm):
    def forward(self, x):
        cols = math.prod(self.normalized_shape)
        out = _rows(x.reshape(-1, cols), 2, self.weight, self.bias, self.eps)
        return out.reshape(x.shape)


class _KBatchNorm(nn.modules.batchnorm._BatchNorm):
    """Batch norm in the reference's mode: batch statistics while training (the running ones
    updated as torch does), the running ones otherwise."""

    def forward(self, x):
        return self.forward_act(x, (0, 0.0, 0.0))

    def forward_act(self, x, spec):
        self._check_input_dim(x)
        channels = x.shape[1]
        inner = x[0, 0].numel() if x.dim() > 2 else 1
        if self.training or self.running_mean is None:
            track = self.training and self.track_running_stats
            momentum = 0.0
            if track:
                self.num_batches_tracked.add_(1)
                momentum = self.momentum
                if momentum is None:  # a cumulative average
                    momentum = 1.0 / float(self.num_batches_tracked)
            scale, shift = _bn_train(
                x, channels, inner, self.weight, self.bias, self.eps,
                self.running_mean if track else None, self.running_var if track else None,
                momentum,
            )
        else:
            scale = torch.rsqrt(self.running_var + self.eps)
            if self.weight is not None:
                scale = scale * self.weight
            shift = -self.running_mean * scale
            if self.bias is not None:
                shift = shift + self.bias
        return _affine_act(x, scale.detach(), shift.detach(), channels, inner, spec)


class _KBatchNorm1d(_KBatchNorm, nn.BatchNorm1d):
    pass


class _KBatchNorm2d(_KBatchNorm, nn.BatchNorm2d):
    pass


class _KBatchNorm3d(_KBatchNorm, nn.BatchNorm3d):
    pass


def _lib_act(m, x, spec):
    """Module ``m`` on ``x`` then activation ``spec``: a convolution or linear layer runs without
    its bias and one kernel adds it with the activation; any other module, then the kernel."""
    if isinstance(m, nn.Linear) and m.bias is not None:
        y = torch.matmul(x, m.weight.t())
        return _bias_act(y, m.bias, 1, spec)
    if isinstance(m, nn.modules.conv._ConvNd) and not m.transposed and m.bias is not None:
        y = m._conv_forward(x, m.weight, None)
        return _bias_act(y, m.bias, _spatial(y, m), spec)
    if isinstance(m, _KBatchNorm):
        return m.forward_act(x, spec)
    return _act(m(x), spec)


def _spatial(y, conv):
    """Elements per channel of one image of a convolution's result (batched or not)."""
    return math.prod(y.shape[y.dim() - len(conv.kernel_size):])


def _conv_bias(m, x):
    """The library convolution without its bias, then one kernel adding it."""
    y = m._conv_forward(x, m.weight, None)
    if m.bias is None:
        return y
    return _bias_act(y, m.bias, _spatial(y, m), (0, 0.0, 0.0))


class _KConv1d(nn.Conv1d):
    def forward(self, x):
        return _conv_bias(self, x)


class _KConv2d(nn.Conv2d):
    def forward(self, x):
        return _conv_bias(self, x)


class _KConv3d(nn.Conv3d):
    def forward(self, x):
        return _conv_bias(self, x)


class _KLinear(nn.Linear):
    def forward(self, x):
        if self.bias is None:
            return F.linear(x, self.weight)
        return _bias_act(torch.matmul(x, self.weight.t()), self.bias, 1, (0, 0.0, 0.0))


def _relu_after(m, x):
    return _lib_act(m, x, (1, 0.0, 0.0))


class _KSeq(nn.Sequential):
    """nn.Sequential with each (library call or batch norm, activation) pair fused."""

    def forward(self, x):
        mods = list(self)
        i = 0
        while i < len(mods):
            spec = _spec(mods[i + 1]) if _FUSE and i + 1 < len(mods) else None
            if spec is not None and _spec(mods[i]) is None:
                x = _lib_act(mods[i], x, spec)
                i += 2
            else:
                x = mods[i](x)
                i += 1
        return x
'''
