"""C++/OpenMP convolution: output elements in parallel, each summing its group's input channels
x window (a transposed convolution in gather form: the input positions whose stride lands on
the output through a tap), in the same three-dims index scheme as the Triton kernels."""

from __future__ import annotations

from htam.offline.backends.cpp.common import HEADER, cpp_names
from htam.offline.ir.conv import conv_calls, conv_helper
from htam.offline.ir.model import ConvIR
from htam.offline.params import ConvParams

_SIZES = (
    "n C_IN C_OUT CIN_G COUT_G D H W OD OH OW KD KH KW SD SH SW PD PH PW DD DH DW transposed"
).split()


def _tap(a: str) -> str:
    """The input coordinate ``i{a}`` of output ``o{a}`` through tap ``k{a}``; skip when outside."""
    A = a.upper()
    return f"""int64_t i{a};
            if (transposed) {{
              const int64_t t = o{a} + P{A} - k{a} * D{A};
              if (t < 0 || t % S{A} != 0) continue;
              i{a} = t / S{A};
            }} else {{
              i{a} = o{a} * S{A} - P{A} + k{a} * D{A};
            }}
            if (i{a} < 0 || i{a} >= {A}) continue;"""


def _kernel(block: int) -> str:
    params = ", ".join(
        [
            "float* __restrict__ out_p",
            "const float* __restrict__ x_p",
            "const float* __restrict__ w_p",
            "const float* __restrict__ b_p",
            "int64_t has_bias",
        ]
        + [f"int64_t {s}" for s in _SIZES]
    )
    return f"""{HEADER}
void HTAM_FN({params}) {{
  const int64_t CHUNK = {block};
  const int64_t nchunks = (n + CHUNK - 1) / CHUNK;
  const int64_t KK = KD * KH * KW;
  #pragma omp parallel for schedule(static) if(n * CIN_G * KK >= PARALLEL_MIN)
  for (int64_t ch_ = 0; ch_ < nchunks; ++ch_) {{
    const int64_t lo = ch_ * CHUNK, hi = std::min(n, lo + CHUNK);
    for (int64_t f = lo; f < hi; ++f) {{
      const int64_t ow = f % OW, oh = (f / OW) % OH, od = (f / (OW * OH)) % OD;
      const int64_t co = (f / (OW * OH * OD)) % C_OUT, nb = f / (OW * OH * OD * C_OUT);
      const int64_t g = co / COUT_G;
      float acc = has_bias ? b_p[co] : 0.0f;
      for (int64_t c = 0; c < CIN_G; ++c) {{
        const int64_t ci = g * CIN_G + c;
        const float* xc = x_p + (nb * C_IN + ci) * D * H * W;
        const float* wc = w_p + (transposed ? (ci * COUT_G + co % COUT_G) : (co * CIN_G + c)) * KK;
        for (int64_t kd = 0; kd < KD; ++kd) {{
          {_tap("d")}
          for (int64_t kh = 0; kh < KH; ++kh) {{
            {_tap("h")}
            for (int64_t kw = 0; kw < KW; ++kw) {{
            {_tap("w")}
              acc += xc[(id * H + ih) * W + iw] * wc[(kd * KH + kh) * KW + kw];
            }}
          }}
        }}
      }}
      out_p[f] = acc;
    }}
  }}
}}
"""


def conv_solution(ir: ConvIR, p: ConvParams) -> tuple[tuple[str, str], list[str]]:
    """((function, C++ source), forward lines): each convolution through :func:`conv_helper_cpp`."""
    return cpp_names("conv", _kernel(p.block)), conv_calls(ir, "_htam_conv")


def conv_helper_cpp(p: ConvParams) -> str:
    """The per-convolution helper calling the extension's function."""
    fn, _ = cpp_names("conv", _kernel(p.block))
    args = (
        "out.data_ptr(), x.data_ptr(), w.data_ptr(), b_arg.data_ptr(), int(bias is not None), "
        "out.numel(), c_in, c_out, cin_g, cout_g, *size, *osz, *k, *s, *p, *d, int(transposed)"
    )
    return conv_helper("_htam_conv", [f"_ext.{fn}({args})"])
