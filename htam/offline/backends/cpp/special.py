"""C++/OpenMP loops of the loss, attention and triangular-product families (float arguments
arrive in a small float tensor: the binding passes pointers and ints only)."""

from __future__ import annotations

from htam.offline.backends.cpp.common import HEADER, cpp_names
from htam.offline.ir.special import KINDS, AttentionIR, LossIR, TriangularIR, loss_forward
from htam.offline.params import AttentionParams, LossParams, TriangularParams

_LOSS = (
    HEADER
    + """
void HTAM_FN(float* __restrict__ rows, const float* __restrict__ a,
             const void* b_raw, const float* __restrict__ c,
             const float* __restrict__ consts, int64_t R, int64_t L, int64_t kind,
             int64_t ignore_index, int64_t log_input, int64_t log_target) {
  const float margin = consts[0], eps = consts[1];
  #pragma omp parallel for schedule(static) if(R * L >= PARALLEL_MIN)
  for (int64_t r = 0; r < R; ++r) {
    const float* x = a + r * L;
    float val = 0.0f;
    if (kind == 0) {  // cross-entropy: log-sum-exp minus the target's logit
      const int64_t t = static_cast<const int64_t*>(b_raw)[r];
      float m = -INFINITY;
      for (int64_t j = 0; j < L; ++j) m = std::max(m, x[j]);
      double s = 0.0;
      for (int64_t j = 0; j < L; ++j) s += std::exp(x[j] - m);
      const bool valid = t != ignore_index;
      val = valid ? (float)(m + std::log(s)) - x[t] : 0.0f;
      rows[R + r] = valid ? 1.0f : 0.0f;
    } else if (kind == 1) {  // KL divergence
      const float* tt = static_cast<const float*>(b_raw) + r * L;
      double acc = 0.0;
      for (int64_t j = 0; j < L; ++j) {
        const float in = log_input ? std::log(x[j]) : x[j];
        const float t = tt[j];
        acc += log_target ? std::exp(t) * (t - in) : (t > 0 ? t * std::log(t) : 0.0f) - t * in;
      }
      val = (float)acc;
    } else {  // triplet margin
      const float* p = static_cast<const float*>(b_raw) + r * L;
      const float* n = c + r * L;
      double dp = 0.0, dn = 0.0;
      for (int64_t j = 0; j < L; ++j) {
        const float ep = x[j] - p[j] + eps, en = x[j] - n[j] + eps;
        dp += ep * ep;
        dn += en * en;
      }
      val = std::max((float)(std::sqrt(dp) - std::sqrt(dn)) + margin, 0.0f);
    }
    rows[r] = val;
  }
}
"""
)

_ATTENTION = (
    HEADER
    + """
void HTAM_FN(float* __restrict__ out, const float* __restrict__ q, const float* __restrict__ k,
             const float* __restrict__ v, const float* __restrict__ consts, int64_t BH,
             int64_t S, int64_t D, int64_t causal) {
  const float scale = consts[0];
  #pragma omp parallel for schedule(static) if(BH * S * S * D >= PARALLEL_MIN)
  for (int64_t row = 0; row < BH * S; ++row) {
    const int64_t bh = row / S, i = row % S;
    const float* qi = q + row * D;
    const int64_t hi = causal ? i + 1 : S;
    std::vector<float> p(hi);
    float m = -INFINITY;
    for (int64_t j = 0; j < hi; ++j) {
      const float* kj = k + (bh * S + j) * D;
      float s = 0.0f;
      for (int64_t d = 0; d < D; ++d) s += qi[d] * kj[d];
      p[j] = s * scale;
      m = std::max(m, p[j]);
    }
    double l = 0.0;
    for (int64_t j = 0; j < hi; ++j) { p[j] = std::exp(p[j] - m); l += p[j]; }
    float* o = out + row * D;
    for (int64_t d = 0; d < D; ++d) o[d] = 0.0f;
    for (int64_t j = 0; j < hi; ++j) {
      const float* vj = v + (bh * S + j) * D;
      const float w = (float)(p[j] / l);
      for (int64_t d = 0; d < D; ++d) o[d] += w * vj[d];
    }
  }
}
"""
)

_TRIANGULAR = (
    HEADER
    + """
void HTAM_FN(float* __restrict__ out, const float* __restrict__ a, const float* __restrict__ b,
             int64_t M, int64_t N, int64_t K, int64_t diag, int64_t upper) {
  #pragma omp parallel for schedule(dynamic, 4) if(M * N * K >= PARALLEL_MIN)
  for (int64_t i = 0; i < M; ++i) {
    float* o = out + i * N;
    // the kept columns of row i: j >= i + diag (triu) or j <= i + diag (tril)
    const int64_t lo = upper ? std::max<int64_t>(0, std::min(N, i + diag)) : 0;
    const int64_t hi = upper ? N : std::max<int64_t>(0, std::min(N, i + diag + 1));
    for (int64_t j = 0; j < N; ++j) o[j] = 0.0f;
    for (int64_t kk = 0; kk < K; ++kk) {
      const float aik = a[i * K + kk];
      const float* bk = b + kk * N;
      for (int64_t j = lo; j < hi; ++j) o[j] += aik * bk[j];
    }
  }
}
"""
)


def loss_solution(ir: LossIR, p: LossParams) -> tuple[tuple[str, str], list[str]]:
    fn, src = cpp_names("loss", _LOSS)
    lines = loss_forward(ir)
    lines += [
        f"consts = torch.tensor([{ir.margin}, {ir.eps!r}], dtype=torch.float32)",
        f"_ext.{fn}(rows.data_ptr(), a.data_ptr(), b.data_ptr(), c.data_ptr(), "
        f"consts.data_ptr(), R, L, {KINDS[ir.kind]}, {ir.ignore_index}, {int(ir.log_input)}, "
        f"{int(ir.log_target)})",
    ]
    if ir.reduction == "none":
        return (fn, src), [*lines, "return rows[:R].reshape(x0.shape[:-1])"]
    total = "rows[:R].sum(dtype=torch.float64)"
    den = (
        "rows[R:].sum(dtype=torch.float64)"
        if ir.reduction == "mean" and ir.kind == ("cross_entropy")
        else "den"
    )
    return (fn, src), [*lines, f"return ({total} / {den}).to(torch.float32)"]


def attention_solution(ir: AttentionIR, p: AttentionParams) -> tuple[tuple[str, str], list[str]]:
    fn, src = cpp_names("attention", _ATTENTION)
    scale = "1.0 / math.sqrt(D)" if ir.scale is None else repr(ir.scale)
    lines = [
        *(f"{n} = {s}.contiguous()" for n, s in (("q", ir.q), ("k", ir.k), ("v", ir.v))),
        "S, D = q.shape[-2], q.shape[-1]",
        "out = torch.empty_like(q)",
        "if out.numel() == 0:",
        "    return out",
        f"consts = torch.tensor([{scale}], dtype=torch.float32)",
        f"_ext.{fn}(out.data_ptr(), q.data_ptr(), k.data_ptr(), v.data_ptr(), "
        f"consts.data_ptr(), q.numel() // (S * D), S, D, {int(ir.causal)})",
        "return out",
    ]
    return (fn, src), lines


def triangular_solution(ir: TriangularIR, p: TriangularParams) -> tuple[tuple[str, str], list[str]]:
    fn, src = cpp_names("triangular", _TRIANGULAR)
    lines = [
        f"a = {ir.a}.contiguous()",
        f"b = {ir.b}.contiguous()",
        "M, K = a.shape",
        "N = b.shape[1]",
        "out = torch.empty((M, N), dtype=torch.float32, device=a.device)",
        f"_ext.{fn}(out.data_ptr(), a.data_ptr(), b.data_ptr(), M, N, K, {ir.diagonal}, "
        f"{int(ir.upper)})",
        "return out",
    ]
    return (fn, src), lines
