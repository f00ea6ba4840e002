"""C++/OpenMP channel norm: statistics ``k`` in parallel, each a mean and a variance pass in
double (or the running statistics in eval mode), then a normalizing pass."""

from __future__ import annotations

from htam.offline.backends.cpp.common import HEADER, cpp_names
from htam.offline.ir.channel_norm import geometry_lines, running_update_lines
from htam.offline.ir.model import ChannelNormIR
from htam.offline.params import ChannelNormParams

_INTS = "K KC CPK A L T S CS has_w has_b batch_stats".split()
_KERNEL = """
void HTAM_FN(float* __restrict__ out_p, const float* __restrict__ x_p,
             const float* __restrict__ w_p, const float* __restrict__ b_p,
             const float* __restrict__ rm_p, const float* __restrict__ rv_p,
             const float* __restrict__ eps_p, float* __restrict__ smean_p,
             float* __restrict__ svar_p, INTS) {
  const double eps = eps_p[0];
  #pragma omp parallel for schedule(dynamic)
  for (int64_t k = 0; k < K; ++k) {
    const int64_t base0 = (k / KC) * CS + (k % KC) * CPK * S, c0 = (k % KC) * CPK;
    double mean, var;
    if (batch_stats) {
      double s = 0.0;
      for (int64_t a = 0; a < A; ++a)
        for (int64_t p = 0; p < L; ++p) s += x_p[base0 + a * T + p];
      mean = s / (double)(A * L);
      double q = 0.0;
      for (int64_t a = 0; a < A; ++a)
        for (int64_t p = 0; p < L; ++p) {
          const double d = x_p[base0 + a * T + p] - mean;
          q += d * d;
        }
      var = q / (double)(A * L);
    } else {
      mean = rm_p[k];
      var = rv_p[k];
    }
    const float fm = (float)mean, rstd = (float)(1.0 / std::sqrt(var + eps));
    smean_p[k] = fm;
    svar_p[k] = (float)var;
    for (int64_t a = 0; a < A; ++a)
      for (int64_t p = 0; p < L; ++p) {
        const int64_t f = base0 + a * T + p, ch = c0 + p / S;
        float y = (x_p[f] - fm) * rstd;
        if (has_w) y *= w_p[ch];
        if (has_b) y += b_p[ch];
        out_p[f] = y;
      }
  }
}
"""


def channel_norm_solution(
    ir: ChannelNormIR, p: ChannelNormParams
) -> tuple[tuple[str, str], list[str]]:
    ints = ", ".join(f"int64_t {n}" for n in _INTS)
    fn, src = cpp_names("cnorm", HEADER + _KERNEL.replace("INTS", ints))
    lines = geometry_lines(ir) + [
        "w = getattr(m, 'weight', None)",
        "b = getattr(m, 'bias', None)",
        "rm = x if batch_stats else m.running_mean.contiguous()",
        "rv = x if batch_stats else m.running_var.contiguous()",
        "eps = torch.full((1,), float(m.eps), dtype=torch.float32)",
        "stats = torch.empty((2, K), dtype=torch.float32)",
        "stat_mean, stat_var = stats[0], stats[1]",
        f"_ext.{fn}(out.data_ptr(), x.data_ptr(), (x if w is None else w).data_ptr(), "
        "(x if b is None else b).data_ptr(), rm.data_ptr(), rv.data_ptr(), eps.data_ptr(), "
        "stat_mean.data_ptr(), stat_var.data_ptr(), K, KC, CPK, A, L, T, S, C * S, "
        "int(w is not None), int(b is not None), int(batch_stats))",
        *running_update_lines(ir),
        "return out",
    ]
    return (fn, src), lines
