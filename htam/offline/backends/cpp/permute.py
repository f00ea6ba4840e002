"""C++/OpenMP strided copy of the permute family: output elements in parallel chunks, each
index split over the view's ``RANK`` padded sizes and dotted with its strides."""

from __future__ import annotations

from htam.offline.backends.cpp.common import HEADER, cpp_names
from htam.offline.ir.permute import RANK, PermuteIR, permute_forward
from htam.offline.params import PoolParams


def _kernel(block: int) -> str:
    sizes = [f"int64_t S{d}" for d in range(RANK)]
    strides = [f"int64_t T{d}" for d in range(RANK)]
    params = ", ".join(
        ["float* __restrict__ out_p", "const float* __restrict__ x_p", "int64_t n"]
        + sizes
        + strides
    )
    split = "\n".join(f"      src += (r % S{d}) * T{d}; r /= S{d};" for d in range(RANK - 1, 0, -1))
    return f"""{HEADER}
void HTAM_FN({params}) {{
  const int64_t CHUNK = {block};
  const int64_t nchunks = (n + CHUNK - 1) / CHUNK;
  #pragma omp parallel for schedule(static) if(n >= PARALLEL_MIN)
  for (int64_t ch_ = 0; ch_ < nchunks; ++ch_) {{
    const int64_t lo = ch_ * CHUNK, hi = std::min(n, lo + CHUNK);
    for (int64_t f = lo; f < hi; ++f) {{
      int64_t r = f, src = 0;
{split}
      src += r * T0;
      out_p[f] = x_p[src];
    }}
  }}
}}
"""


def permute_solution(ir: PermuteIR, p: PoolParams) -> tuple[tuple[str, str], list[str]]:
    fn, src = cpp_names("permute", _kernel(p.block))
    call = f"_ext.{fn}(out.data_ptr(), v.data_ptr(), n, *sizes, *strides)"
    return (fn, src), [*permute_forward(ir), call, "return out"]
