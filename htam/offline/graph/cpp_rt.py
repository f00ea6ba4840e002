"""The C++ (OpenMP) primitives a whole model's rewritten modules call on the CPU: the same
functions as :mod:`.triton_rt` (``_act``, ``_affine_act``, ``_bias_act``, ``_bn_train``,
``_rows``, ``_lstm_cell``, ``_gru_cell``), built once with torch.utils.cpp_extension."""

from __future__ import annotations

from htam.offline.backends.cpp.loader import IMPORTS as _CPP_IMPORTS
from htam.offline.backends.cpp.loader import cpp_loader
from htam.offline.params import ModelParams

IMPORTS = _CPP_IMPORTS.replace(
    "import torch.nn as nn\n", "import torch.nn as nn\nimport torch.nn.functional as F\n"
)

_SRC = r"""
#include <torch/extension.h>
#include <cmath>

static inline float act_fn(float v, int kind, float lo, float hi) {
    switch (kind) {
        case 1: return v > 0.f ? v : 0.f;
        case 2: return 1.f / (1.f + std::exp(-v));
        case 3: return std::tanh(v);
        case 4: return 0.5f * v * (1.f + std::erf(v * 0.7071067811865476f));
        case 5: return 0.5f * v * (1.f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
        case 6: return v / (1.f + std::exp(-v));
        case 7: return std::min(std::max(v, lo), hi);
        case 8: return v >= 0.f ? v : v * lo;
        case 9: return std::exp(v);
        default: return v;
    }
}

void act(torch::Tensor x, torch::Tensor out, int64_t kind, double lo, double hi) {
    const float* px = x.data_ptr<float>();
    float* po = out.data_ptr<float>();
    const int64_t n = x.numel();
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i += BLOCK) {
        const int64_t end = std::min(n, i + BLOCK);
        for (int64_t j = i; j < end; ++j) po[j] = act_fn(px[j], (int)kind, (float)lo, (float)hi);
    }
}

void channel_act(torch::Tensor x, torch::Tensor out, torch::Tensor scale, torch::Tensor shift,
                 int64_t inner, int64_t C, int64_t kind, double lo, double hi) {
    const float* px = x.data_ptr<float>();
    float* po = out.data_ptr<float>();
    const float* ps = scale.numel() ? scale.data_ptr<float>() : nullptr;
    const float* pb = shift.data_ptr<float>();
    const int64_t outer = x.numel() / (inner * C);
    #pragma omp parallel for collapse(2) schedule(static)
    for (int64_t o = 0; o < outer; ++o) {
        for (int64_t c = 0; c < C; ++c) {
            const float s = ps ? ps[c] : 1.f, b = pb[c];
            const int64_t base = (o * C + c) * inner;
            for (int64_t r = 0; r < inner; ++r)
                po[base + r] = act_fn(px[base + r] * s + b, (int)kind, (float)lo, (float)hi);
        }
    }
}

torch::Tensor moments(torch::Tensor x, int64_t C, int64_t inner) {
    const float* px = x.data_ptr<float>();
    const int64_t outer = x.numel() / (inner * C);
    auto res = torch::empty({2, C}, x.options());
    float* pr = res.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < C; ++c) {
        const double k = px[c * inner];
        double s = 0.0, s2 = 0.0;
        for (int64_t o = 0; o < outer; ++o) {
            const float* row = px + (o * C + c) * inner;
            for (int64_t r = 0; r < inner; ++r) {
                const double d = row[r] - k;
                s += d;
                s2 += d * d;
            }
        }
        const double count = (double)(outer * inner);
        const double m = s / count;
        pr[c] = (float)(k + m);
        pr[C + c] = (float)std::max(s2 / count - m * m, 0.0);
    }
    return res;
}

void rows(torch::Tensor x, torch::Tensor out, torch::Tensor w, torch::Tensor b, int64_t cols,
          double eps, int64_t mode) {
    const float* px = x.data_ptr<float>();
    float* po = out.data_ptr<float>();
    const float* pw = w.numel() ? w.data_ptr<float>() : nullptr;
    const float* pb = b.numel() ? b.data_ptr<float>() : nullptr;
    const int64_t nrows = x.numel() / cols;
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < nrows; ++i) {
        const float* r = px + i * cols;
        float* o = po + i * cols;
        if (mode == 2) {
            double s = 0.0;
            for (int64_t j = 0; j < cols; ++j) s += r[j];
            const double mean = s / cols;
            double s2 = 0.0;
            for (int64_t j = 0; j < cols; ++j) s2 += (r[j] - mean) * (r[j] - mean);
            const float rstd = (float)(1.0 / std::sqrt(s2 / cols + eps));
            for (int64_t j = 0; j < cols; ++j) {
                float v = (float)(r[j] - mean) * rstd;
                if (pw) v *= pw[j];
                if (pb) v += pb[j];
                o[j] = v;
            }
        } else {
            float top = -INFINITY;
            for (int64_t j = 0; j < cols; ++j) top = std::max(top, r[j]);
            if (top == -INFINITY) top = 0.f;
            double total = 0.0;
            for (int64_t j = 0; j < cols; ++j) total += std::exp(r[j] - top);
            const float lt = (float)std::log(total), inv = (float)(1.0 / total);
            for (int64_t j = 0; j < cols; ++j)
                o[j] = mode == 1 ? r[j] - top - lt : std::exp(r[j] - top) * inv;
        }
    }
}

static inline float sig(float v) { return 1.f / (1.f + std::exp(-v)); }

void cell(torch::Tensor gx, torch::Tensor gh, torch::Tensor c, torch::Tensor h,
          torch::Tensor out, bool lstm) {
    const float* px = gx.data_ptr<float>();
    const float* pg = gh.data_ptr<float>();
    float* pc = lstm ? c.data_ptr<float>() : nullptr;
    float* ph = h.data_ptr<float>();
    float* po = out.data_ptr<float>();
    const int64_t B = h.size(0), H = h.size(1), os = out.stride(0);
    #pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; ++b) {
        for (int64_t j = 0; j < H; ++j) {
            float hv;
            if (lstm) {
                const int64_t g = b * 4 * H + j;
                const float i = sig(px[g] + pg[g]), f = sig(px[g + H] + pg[g + H]);
                const float gg = std::tanh(px[g + 2 * H] + pg[g + 2 * H]);
                const float o = sig(px[g + 3 * H] + pg[g + 3 * H]);
                const float cv = f * pc[b * H + j] + i * gg;
                pc[b * H + j] = cv;
                hv = o * std::tanh(cv);
            } else {
                const int64_t g = b * 3 * H + j;
                const float r = sig(px[g] + pg[g]), z = sig(px[g + H] + pg[g + H]);
                const float nv = std::tanh(px[g + 2 * H] + r * pg[g + 2 * H]);
                hv = (1.f - z) * nv + z * ph[b * H + j];
            }
            ph[b * H + j] = hv;
            po[b * os + j] = hv;
        }
    }
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("act", &act);
    m.def("channel_act", &channel_act);
    m.def("moments", &moments);
    m.def("rows", &rows);
    m.def("cell", &cell);
}
"""

_WRAPPERS = '''
_NONE = torch.empty(0)


def _act(x, spec, inplace=False):
    """The activation ``spec`` (kind, lo, hi) of ``x``; written into ``x`` when ``inplace``."""
    src = x.contiguous()
    out = src if inplace and src is x else torch.empty_like(src)
    _ext.act(src, out, spec[0], float(spec[1]), float(spec[2]))
    if inplace and out is not x:
        x.copy_(out)
        return x
    return out


def _affine_act(x, scale, shift, channels, inner, spec, out=None):
    """x * scale[c] + shift[c] then ``spec``, c the channel of each element (scale None: 1)."""
    src = x.contiguous()
    out = torch.empty_like(src) if out is None else out
    scale = _NONE if scale is None else scale.contiguous()
    _ext.channel_act(src, out, scale, shift.contiguous(), inner, channels, spec[0],
                     float(spec[1]), float(spec[2]))
    return out


def _bias_act(y, bias, inner, spec):
    """A library result ``y`` (fresh, contiguous) plus its per-channel bias, then ``spec``."""
    y = y.contiguous()
    return _affine_act(y, None, bias.detach(), bias.numel(), inner, spec, out=y)


def _bn_train(x, channels, inner, weight, bias, eps, running_mean, running_var, momentum):
    """Training-mode batch norm's per-channel (scale, shift) from the batch's moments; the
    running statistics (when given) updated with ``momentum`` as torch does."""
    res = _ext.moments(x.contiguous(), channels, inner)
    mean, var = res[0], res[1]
    if running_mean is not None:
        count = x.numel() // channels
        with torch.no_grad():
            running_mean.mul_(1 - momentum).add_(mean * momentum)
            running_var.mul_(1 - momentum).add_(var * (count / max(count - 1, 1)) * momentum)
    scale = torch.rsqrt(var + eps)
    if weight is not None:
        scale = scale * weight.detach()
    shift = -mean * scale
    if bias is not None:
        shift = shift + bias.detach()
    return scale, shift


def _lstm_cell(gx, gh, c, h, out):
    _ext.cell(gx, gh, c, h, out, True)


def _gru_cell(gx, gh, h, out):
    _ext.cell(gx, gh, h, h, out, False)


def _rows(x, mode, weight=None, bias=None, eps=0.0):
    """Softmax (mode 0), log-softmax (1) or layer norm (2) of each row of ``x`` (last dim)."""
    src = x.contiguous()
    out = torch.empty_like(src)
    cols = src.shape[-1] if src.dim() else 1
    if src.numel() and cols:
        w = _NONE if weight is None else weight.detach().contiguous()
        b = _NONE if bias is None else bias.detach().contiguous()
        _ext.rows(src, out, w, b, cols, float(eps), mode)
    return out
'''


def primitives(params: ModelParams) -> str:
    """The C++ source's build and the Python wrappers around it."""
    src = f"#define BLOCK {params.block}\n" + _SRC
    return cpp_loader(f"htam_model_rt_{params.block}", src, "model") + _WRAPPERS
