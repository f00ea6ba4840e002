"""C++/OpenMP pooling: output elements in parallel, each reading its window."""

from __future__ import annotations

from htam.offline.backends.cpp.common import HEADER, cpp_names
from htam.offline.ir.model import PoolIR
from htam.offline.ir.pool import adaptive_forward, pool_forward
from htam.offline.params import PoolParams

_SIZES = "D H W OD OH OW KD KH KW SD SH SW PD PH PW DD DH DW divisor count_pad".split()


def _kernel(kind: str, block: int) -> str:
    is_max = kind == "max"
    init = "-INFINITY" if is_max else "0.0f"
    update = "acc = std::max(acc, x_p[row + iw]);" if is_max else "acc += x_p[row + iw];"
    finish = (
        "const float res = acc;"
        if is_max
        else """int64_t cd, ch, cw;
      if (count_pad) {
        cd = std::min(d0 + KD, D + PD) - d0;
        ch = std::min(h0 + KH, H + PH) - h0;
        cw = std::min(w0 + KW, W + PW) - w0;
      } else {
        cd = std::min(d0 + KD, D) - std::max(d0, (int64_t)0);
        ch = std::min(h0 + KH, H) - std::max(h0, (int64_t)0);
        cw = std::min(w0 + KW, W) - std::max(w0, (int64_t)0);
      }
      const float res = acc / (float)(divisor > 0 ? divisor : cd * ch * cw);"""
    )
    params = ", ".join(
        ["float* __restrict__ out_p", "const float* __restrict__ x_p", "int64_t n"]
        + [f"int64_t {s}" for s in _SIZES]
    )
    return f"""{HEADER}
void HTAM_FN({params}) {{
  const int64_t CHUNK = {block};
  const int64_t nchunks = (n + CHUNK - 1) / CHUNK;
  #pragma omp parallel for schedule(static) if(n * KD * KH * KW >= PARALLEL_MIN)
  for (int64_t ch_ = 0; ch_ < nchunks; ++ch_) {{
    const int64_t lo = ch_ * CHUNK, hi = std::min(n, lo + CHUNK);
    for (int64_t f = lo; f < hi; ++f) {{
      const int64_t ow = f % OW, oh = (f / OW) % OH, od = (f / (OW * OH)) % OD;
      const int64_t nc = f / (OW * OH * OD);
      const int64_t d0 = od * SD - PD, h0 = oh * SH - PH, w0 = ow * SW - PW;
      float acc = {init};
      for (int64_t kd = 0; kd < KD; ++kd) {{
        const int64_t id = d0 + kd * DD;
        if (id < 0 || id >= D) continue;
        for (int64_t kh = 0; kh < KH; ++kh) {{
          const int64_t ih = h0 + kh * DH;
          if (ih < 0 || ih >= H) continue;
          const int64_t row = ((nc * D + id) * H + ih) * W;
          for (int64_t kw = 0; kw < KW; ++kw) {{
            const int64_t iw = w0 + kw * DW;
            if (iw < 0 || iw >= W) continue;
            {update}
          }}
        }}
      }}
      {finish}
      out_p[f] = res;
    }}
  }}
}}
"""


def _adaptive_kernel(kind: str, block: int) -> str:
    """Output ``i`` of a dim of ``n`` pools ``[floor(i n / o), ceil((i + 1) n / o))``."""
    is_max = kind == "max"
    update = "acc = std::max(acc, x_p[row + iw]);" if is_max else "acc += x_p[row + iw];"
    finish = "acc" if is_max else "acc / (float)((d1 - d0) * (h1 - h0) * (w1 - w0))"
    sizes = "D H W OD OH OW".split()
    params = ", ".join(
        ["float* __restrict__ out_p", "const float* __restrict__ x_p", "int64_t n"]
        + [f"int64_t {s}" for s in sizes]
    )
    return f"""{HEADER}
void HTAM_FN({params}) {{
  const int64_t CHUNK = {block};
  const int64_t nchunks = (n + CHUNK - 1) / CHUNK;
  #pragma omp parallel for schedule(static) if(n * (D / OD + 1) * (H / OH + 1) * (W / OW + 1) >= PARALLEL_MIN)
  for (int64_t ch_ = 0; ch_ < nchunks; ++ch_) {{
    const int64_t lo = ch_ * CHUNK, hi = std::min(n, lo + CHUNK);
    for (int64_t f = lo; f < hi; ++f) {{
      const int64_t ow = f % OW, oh = (f / OW) % OH, od = (f / (OW * OH)) % OD;
      const int64_t nc = f / (OW * OH * OD);
      const int64_t d0 = od * D / OD, d1 = ((od + 1) * D + OD - 1) / OD;
      const int64_t h0 = oh * H / OH, h1 = ((oh + 1) * H + OH - 1) / OH;
      const int64_t w0 = ow * W / OW, w1 = ((ow + 1) * W + OW - 1) / OW;
      float acc = {"-INFINITY" if is_max else "0.0f"};
      for (int64_t id = d0; id < d1; ++id) {{
        for (int64_t ih = h0; ih < h1; ++ih) {{
          const int64_t row = ((nc * D + id) * H + ih) * W;
          for (int64_t iw = w0; iw < w1; ++iw) {{
            {update}
          }}
        }}
      }}
      out_p[f] = {finish};
    }}
  }}
}}
"""


def pool_solution(ir: PoolIR, p: PoolParams) -> tuple[tuple[str, str], list[str]]:
    if ir.adaptive:
        fn, src = cpp_names("pool", _adaptive_kernel(ir.kind, p.block))
        lines = adaptive_forward(ir.source, ir.module, ir.nd)
        args = "out.data_ptr(), x.data_ptr(), n, *size, *osz"
        return (fn, src), [*lines, f"_ext.{fn}({args})", "return out"]
    fn, src = cpp_names("pool", _kernel(ir.kind, p.block))
    lines = pool_forward(ir.source, ir.module, ir.nd, ir.kind)
    args = "out.data_ptr(), x.data_ptr(), n, *size, *osz, *k, *s, *p, *d, divisor, int(count_pad)"
    return (fn, src), [*lines, f"_ext.{fn}({args})", "return out"]
