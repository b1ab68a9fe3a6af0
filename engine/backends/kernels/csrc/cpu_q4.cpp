// The engine's CPU int4 matrix-vector product, built with cpu_decode.cpp by cpu_kernels.py.
//
// q4_matvec: y = x W^T for a few bfloat16 rows x and a Q4_1 matrix (w = d*q + m per group of
// 32 weights, q in 0..15), for decode steps. bfloat16(128 + q) is 0x4300 | q, so a code becomes
// an exact bfloat16 weight by one AND-OR, and per group
// sum(x*w) = d*sum(x*(128 + q)) + (m - 128d)*sum(x). vdpbf16ps multiplies two weights per lane
// exactly, adding in float32; each code is read once for all rows. Built only where the CPU
// has AVX512-BF16 (elsewhere torch's int4 kernel serves).
#ifdef __AVX512BF16__
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <vector>

#include "cpu_common.h"
#include "cpu_kernels.h"

namespace {

using BF = at::BFloat16;

inline __m512 load16(const at::Half* p) {  // 16 float16 values as float32
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Rows m0..m0+MB of x against 16 outputs (lanes) of block nb. codes [NB][G][4][32 words]: word
// 2l+e of vector t holds lane l's codes for dims 8t+2s+e, s = 0..3, in its nibbles (s = 0 low).
template <int MB>
void block(const uint32_t* xp, const float* xs, const uint16_t* codes, const at::Half* d,
           const at::Half* m, int64_t G, int64_t nb, int64_t m0, int64_t N, BF* out) {
  // independent sums (vdpbf16ps's latency), as many for every MB and added in one order: a
  // row's result must not depend on how many rows share the step (batch-invariant decode)
  constexpr int A = 4;
  const __m512i low = _mm512_set1_epi16(0xF), bias = _mm512_set1_epi16(0x4300);
  const int64_t K2 = G * 16;  // pairs per row of x
  __m512 acc[MB];
  for (int r = 0; r < MB; r++) acc[r] = _mm512_setzero_ps();
  for (int64_t g = 0; g < G; g++) {
    const uint16_t* cb = codes + (nb * G + g) * 128;
    __m512 ga[MB][A];
    for (int r = 0; r < MB; r++)
      for (int a = 0; a < A; a++) ga[r][a] = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int t = 0; t < 4; t++) {
      const __m512i v = _mm512_loadu_si512(cb + t * 32);
#pragma GCC unroll 4
      for (int s = 0; s < 4; s++) {
        const int p = 4 * t + s, a = p % A;
        const __m512i q = s == 0 ? v : _mm512_srli_epi16(v, 4 * s);
        const __m512bh w = (__m512bh)_mm512_ternarylogic_epi32(q, low, bias, 0xEA);  // q&low|bias
        for (int r = 0; r < MB; r++) {
          const __m512bh xv = (__m512bh)_mm512_set1_epi32(xp[(m0 + r) * K2 + g * 16 + p]);
          ga[r][a] = _mm512_dpbf16_ps(ga[r][a], xv, w);
        }
      }
    }
    const __m512 dv = load16(d + (nb * G + g) * 16);
    const __m512 mv = _mm512_fnmadd_ps(_mm512_set1_ps(128.f), dv, load16(m + (nb * G + g) * 16));
    for (int r = 0; r < MB; r++) {
      __m512 sum = ga[r][0];
      for (int a = 1; a < A; a++) sum = _mm512_add_ps(sum, ga[r][a]);
      acc[r] = _mm512_fmadd_ps(sum, dv, acc[r]);
      acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(xs[(m0 + r) * G + g]), mv, acc[r]);
    }
  }
  for (int r = 0; r < MB; r++)
    _mm256_storeu_si256((__m256i*)(out + (m0 + r) * N + nb * 16),
                        (__m256i)_mm512_cvtneps_pbh(acc[r]));
}

}  // namespace

// x [M, K] bfloat16; codes, d, m from torch_int4.pack_q4 (d and m float16: Q4_1's own
// precision). Returns [M, N] bfloat16 (rounded to nearest even, as torch rounds).
torch::Tensor q4_matvec(torch::Tensor x, torch::Tensor codes, torch::Tensor d, torch::Tensor m) {
  check_q4_packing(codes, d, m);
  TORCH_CHECK(x.scalar_type() == torch::kBFloat16 && x.dim() == 2 && x.is_contiguous());
  const int64_t M = x.size(0), K = x.size(1), NB = codes.size(0), G = codes.size(1);
  TORCH_CHECK(G * 32 == K, "q4_matvec: codes do not fit x's width");
  const int64_t N = NB * 16;
  auto out = torch::empty({M, N}, x.options());
  const BF* xb = x.data_ptr<BF>();
  const std::vector<float> xs = group_sums(xb, M, K);
  const auto* xp = reinterpret_cast<const uint32_t*>(xb);
  const auto* cp = reinterpret_cast<const uint16_t*>(codes.data_ptr<int16_t>());
  const at::Half *dp = d.data_ptr<at::Half>(), *mp = m.data_ptr<at::Half>();
  BF* op = out.data_ptr<BF>();
  at::parallel_for(0, NB, 4, [&](int64_t begin, int64_t end) {
    for (int64_t nb = begin; nb < end; nb++)
      for (int64_t m0 = 0; m0 < M; m0 += 4) {
        switch (std::min<int64_t>(4, M - m0)) {
          case 4: block<4>(xp, xs.data(), cp, dp, mp, G, nb, m0, N, op); break;
          case 3: block<3>(xp, xs.data(), cp, dp, mp, G, nb, m0, N, op); break;
          case 2: block<2>(xp, xs.data(), cp, dp, mp, G, nb, m0, N, op); break;
          default: block<1>(xp, xs.data(), cp, dp, mp, G, nb, m0, N, op);
        }
      }
  });
  return out;
}

// W^T [K, N] in bfloat16 from a matrix packed for q4_matvec, into `out` (a reused buffer: a
// prefill's GEMM then reads each matrix from cache, and no bfloat16 copy is kept). w = d*q + m
// rounded where Q4Weight.dequantize (float32 numpy) and torch's cast to bfloat16 round.
void q4_weight_t(torch::Tensor codes, torch::Tensor d, torch::Tensor m, torch::Tensor out) {
  check_q4_packing(codes, d, m);
  const int64_t NB = codes.size(0), G = codes.size(1), N = NB * 16, K = G * 32;
  TORCH_CHECK(out.scalar_type() == torch::kBFloat16 && out.is_contiguous());
  TORCH_CHECK(out.dim() == 2 && out.size(0) == K && out.size(1) == N,
              "q4_weight_t: out is not [K, N]");
  const auto* cp = reinterpret_cast<const uint16_t*>(codes.data_ptr<int16_t>());
  const at::Half *dp = d.data_ptr<at::Half>(), *mp = m.data_ptr<at::Half>();
  BF* op = out.data_ptr<BF>();
  constexpr int RNE = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  at::parallel_for(0, NB, 4, [&](int64_t begin, int64_t end) {
    const __m512i low = _mm512_set1_epi32(0xF);
    for (int64_t nb = begin; nb < end; nb++)
      for (int64_t g = 0; g < G; g++) {
        const uint16_t* cb = cp + (nb * G + g) * 128;
        const __m512 dv = load16(dp + (nb * G + g) * 16), mv = load16(mp + (nb * G + g) * 16);
        for (int t = 0; t < 4; t++) {
          const __m512i v = _mm512_loadu_si512(cb + t * 32);
          for (int s = 0; s < 4; s++) {  // a dword per lane: dim 2p (low word), 2p+1 (high)
            const __m512i q = s == 0 ? v : _mm512_srli_epi16(v, 4 * s);
            const __m512i qe[2] = {_mm512_and_si512(q, low),
                                   _mm512_and_si512(_mm512_srli_epi32(q, 16), low)};
            for (int e = 0; e < 2; e++) {
              const __m512 w = _mm512_add_round_ps(
                  _mm512_mul_round_ps(_mm512_cvtepi32_ps(qe[e]), dv, RNE), mv, RNE);
              const int64_t k = g * 32 + 8 * t + 2 * s + e;
              _mm256_storeu_si256((__m256i*)(op + k * N + nb * 16),
                                  (__m256i)_mm512_cvtneps_pbh(w));
            }
          }
        }
      }
  });
}
#endif
