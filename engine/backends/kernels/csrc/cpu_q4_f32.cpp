// The int4 products for float32 activations (CPUs without native bfloat16, where the engine's
// activations stay float32), built with cpu_decode.cpp by cpu_kernels.py wherever the CPU has
// AVX2 and FMA. Same packing as cpu_q4.cpp (torch_int4.pack_q4).
//
// q4_matvec_f32: y = x W^T for a few float32 rows x and a Q4_1 matrix (w = d*q + m per group of
// 32 weights): per group sum(x*w) = d*sum(x*q) + m*sum(x), the codes made float32 integers
// (exact), each code read once for two rows. q4_weight_t_f32: W^T [K, N] in float32 for a
// prompt's GEMM, rounded as Q4Weight.dequantize rounds (the multiply, then the add).
#include "cpu_common.h"
#include "cpu_kernels.h"
#ifdef SERVEGATE_Q4_F32
#include <torch/extension.h>
#include <immintrin.h>
#include <vector>

namespace {

inline __m256 load8(const at::Half* p) {  // 8 float16 values as float32
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// A word's code for dim 2p+e, as a float32 integer per lane: dword l of a 256-bit half holds
// output l's (dim 2p, dim 2p+1) codes in its low and high words, nibble s of each.
inline __m256 code(__m256i v, int s, int e) {
  const __m256i q = _mm256_srli_epi32(v, 4 * s + 16 * e);
  return _mm256_cvtepi32_ps(_mm256_and_si256(q, _mm256_set1_epi32(0xF)));
}

// Rows m0..m0+MB of x against the 16 outputs of block nb, in two halves of 8 lanes.
template <int MB>
void block(const float* x, const float* xs, const uint16_t* codes, const at::Half* d,
           const at::Half* m, int64_t K, int64_t G, int64_t nb, int64_t m0, int64_t N,
           float* out) {
  __m256 acc[MB][2];
  for (int r = 0; r < MB; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t g = 0; g < G; g++) {
    const uint16_t* cb = codes + (nb * G + g) * 128;
    __m256 ga[MB][2][2];  // [row][half][dim parity]: independent sums for the FMA latency
    for (int r = 0; r < MB; r++)
      for (int h = 0; h < 2; h++) ga[r][h][0] = ga[r][h][1] = _mm256_setzero_ps();
    for (int t = 0; t < 4; t++)
      for (int h = 0; h < 2; h++) {
        const auto* src = reinterpret_cast<const __m256i*>(cb + t * 32 + h * 16);
        const __m256i v = _mm256_loadu_si256(src);
#pragma GCC unroll 4
        for (int s = 0; s < 4; s++) {
          const int64_t k = g * 32 + 2 * (4 * t + s);
          const __m256 q0 = code(v, s, 0), q1 = code(v, s, 1);
          for (int r = 0; r < MB; r++) {
            const float* xr = x + (m0 + r) * K + k;
            ga[r][h][0] = _mm256_fmadd_ps(q0, _mm256_broadcast_ss(xr), ga[r][h][0]);
            ga[r][h][1] = _mm256_fmadd_ps(q1, _mm256_broadcast_ss(xr + 1), ga[r][h][1]);
          }
        }
      }
    for (int h = 0; h < 2; h++) {
      const __m256 dv = load8(d + (nb * G + g) * 16 + 8 * h);
      const __m256 mv = load8(m + (nb * G + g) * 16 + 8 * h);
      for (int r = 0; r < MB; r++) {
        const __m256 sum = _mm256_add_ps(ga[r][h][0], ga[r][h][1]);
        acc[r][h] = _mm256_fmadd_ps(sum, dv, acc[r][h]);
        acc[r][h] = _mm256_fmadd_ps(_mm256_set1_ps(xs[(m0 + r) * G + g]), mv, acc[r][h]);
      }
    }
  }
  for (int r = 0; r < MB; r++)
    for (int h = 0; h < 2; h++) _mm256_storeu_ps(out + (m0 + r) * N + nb * 16 + 8 * h, acc[r][h]);
}

}  // namespace

// x [M, K] float32; codes, d, m from torch_int4.pack_q4. Returns [M, N] float32.
torch::Tensor q4_matvec_f32(torch::Tensor x, torch::Tensor codes, torch::Tensor d,
                            torch::Tensor m) {
  check_q4_packing(codes, d, m);
  TORCH_CHECK(x.scalar_type() == torch::kFloat && x.dim() == 2 && x.is_contiguous());
  const int64_t M = x.size(0), K = x.size(1), NB = codes.size(0), G = codes.size(1);
  TORCH_CHECK(G * 32 == K, "q4_matvec_f32: codes do not fit x's width");
  const int64_t N = NB * 16;
  auto out = torch::empty({M, N}, x.options());
  const float* xp = x.data_ptr<float>();
  const std::vector<float> xs = group_sums(xp, M, K);
  const auto* cp = reinterpret_cast<const uint16_t*>(codes.data_ptr<int16_t>());
  const at::Half *dp = d.data_ptr<at::Half>(), *mp = m.data_ptr<at::Half>();
  float* op = out.data_ptr<float>();
  at::parallel_for(0, NB, 4, [&](int64_t begin, int64_t end) {
    for (int64_t nb = begin; nb < end; nb++)
      for (int64_t m0 = 0; m0 < M; m0 += 2) {
        if (M - m0 >= 2)
          block<2>(xp, xs.data(), cp, dp, mp, K, G, nb, m0, N, op);
        else
          block<1>(xp, xs.data(), cp, dp, mp, K, G, nb, m0, N, op);
      }
  });
  return out;
}

// W^T [K, N] float32 into `out` from a matrix packed by pack_q4.
void q4_weight_t_f32(torch::Tensor codes, torch::Tensor d, torch::Tensor m, torch::Tensor out) {
  check_q4_packing(codes, d, m);
  const int64_t NB = codes.size(0), G = codes.size(1), N = NB * 16, K = G * 32;
  TORCH_CHECK(out.scalar_type() == torch::kFloat && out.is_contiguous());
  TORCH_CHECK(out.dim() == 2 && out.size(0) == K && out.size(1) == N,
              "q4_weight_t_f32: out is not [K, N]");
  const auto* cp = reinterpret_cast<const uint16_t*>(codes.data_ptr<int16_t>());
  const at::Half *dp = d.data_ptr<at::Half>(), *mp = m.data_ptr<at::Half>();
  float* op = out.data_ptr<float>();
  at::parallel_for(0, NB, 4, [&](int64_t begin, int64_t end) {
    for (int64_t nb = begin; nb < end; nb++)
      for (int64_t g = 0; g < G; g++)
        for (int h = 0; h < 2; h++) {
          const __m256 dv = load8(dp + (nb * G + g) * 16 + 8 * h);
          const __m256 mv = load8(mp + (nb * G + g) * 16 + 8 * h);
          for (int t = 0; t < 4; t++) {
            const __m256i v = _mm256_loadu_si256(
                reinterpret_cast<const __m256i*>(cp + (nb * G + g) * 128 + t * 32 + h * 16));
            for (int s = 0; s < 4; s++)
              for (int e = 0; e < 2; e++) {
                __m256 w = _mm256_mul_ps(code(v, s, e), dv);
                asm("" : "+x"(w));  // no FMA contraction: numpy rounds the product first
                w = _mm256_add_ps(w, mv);
                const int64_t k = g * 32 + 2 * (4 * t + s) + e;
                _mm256_storeu_ps(op + k * N + nb * 16 + 8 * h, w);
              }
          }
        }
  });
}
#endif
