// The engine's CPU int4 matrix-vector product, built with cpu_decode.cpp by cpu_kernels.py.
//
// q4_matvec: y = x W^T for a few bfloat16 rows x and a Q4_1 matrix (w = d*q + m per group of
// 32 weights, q in 0..15), for decode steps. Per group, sum(x*w) = d*sum(x*q) + m*sum(x): the
// codes become bfloat16 integers (exact) and vdpbf16ps multiplies two weights per lane exactly,
// adding in float32; each code is read once for all rows. Built only where the CPU has
// AVX512-BF16 (elsewhere torch's int4 kernel serves).
#ifdef __AVX512BF16__
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <vector>

namespace {

using BF = at::BFloat16;

inline __m512 load16(const at::Half* p) {  // 16 float16 values as float32
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Rows m0..m0+MB of x against 16 outputs (lanes) of block nb. codes [NB][G][16 pairs][16
// lanes]: a byte holds a lane's two codes for dims 2p (low nibble) and 2p+1.
template <int MB>
void block(const uint32_t* xp, const float* xs, const uint8_t* codes, const at::Half* d,
           const at::Half* m, int64_t G, int64_t nb, int64_t m0, int64_t N, BF* out) {
  constexpr int A = MB == 1 ? 4 : MB == 2 ? 2 : 1;  // independent sums: vdpbf16ps's latency
  alignas(64) static const uint16_t lut[32] = {  // bfloat16 of 0..15
      0x0000, 0x3F80, 0x4000, 0x4040, 0x4080, 0x40A0, 0x40C0, 0x40E0,
      0x4100, 0x4110, 0x4120, 0x4130, 0x4140, 0x4150, 0x4160, 0x4170};
  const __m512i table = _mm512_load_si512(lut), low = _mm512_set1_epi32(0xF);
  const int64_t K2 = G * 16;  // pairs per row of x
  __m512 acc[MB];
  for (int r = 0; r < MB; r++) acc[r] = _mm512_setzero_ps();
  for (int64_t g = 0; g < G; g++) {
    const uint8_t* cb = codes + (nb * G + g) * 256;
    __m512 ga[MB][A];
    for (int r = 0; r < MB; r++)
      for (int a = 0; a < A; a++) ga[r][a] = _mm512_setzero_ps();
    for (int p0 = 0; p0 < 16; p0 += A)
#pragma GCC unroll 4
      for (int a = 0; a < A; a++) {
        const int p = p0 + a;
        const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(cb + p * 16)));
        // low word: the low nibble; high word: the high one (vpermw reads an index's 5 low bits)
        const __m512i idx = _mm512_ternarylogic_epi32(low, v, _mm512_slli_epi32(v, 12), 0xCA);
        const __m512bh w = (__m512bh)_mm512_permutexvar_epi16(idx, table);
        for (int r = 0; r < MB; r++) {
          const __m512bh xv = (__m512bh)_mm512_set1_epi32(xp[(m0 + r) * K2 + g * 16 + p]);
          ga[r][a] = _mm512_dpbf16_ps(ga[r][a], xv, w);
        }
      }
    const __m512 dv = load16(d + (nb * G + g) * 16), mv = load16(m + (nb * G + g) * 16);
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

// x [M, K] bfloat16; codes [N/16, K/32, 16, 16] uint8; d, m [N/16, K/32, 16] float16 (Q4_1's
// own precision).
// Returns [M, N] bfloat16 (rounded to nearest even, as torch rounds).
torch::Tensor q4_matvec(torch::Tensor x, torch::Tensor codes, torch::Tensor d, torch::Tensor m) {
  TORCH_CHECK(x.scalar_type() == torch::kBFloat16 && x.dim() == 2 && x.is_contiguous());
  TORCH_CHECK(codes.scalar_type() == torch::kUInt8 && codes.dim() == 4 && codes.is_contiguous());
  TORCH_CHECK(d.scalar_type() == torch::kHalf && m.scalar_type() == torch::kHalf);
  TORCH_CHECK(d.is_contiguous() && m.is_contiguous() && d.sizes() == m.sizes());
  const int64_t M = x.size(0), K = x.size(1), NB = codes.size(0), G = codes.size(1);
  TORCH_CHECK(G * 32 == K && codes.size(2) == 16 && codes.size(3) == 16,
              "q4_matvec: codes do not fit x's width");
  TORCH_CHECK(d.size(0) == NB && d.size(1) == G && d.size(2) == 16);
  const int64_t N = NB * 16;
  auto out = torch::empty({M, N}, x.options());
  const BF* xb = x.data_ptr<BF>();
  std::vector<float> xs(M * G);  // each row's sum over each group
  for (int64_t r = 0; r < M; r++)
    for (int64_t g = 0; g < G; g++) {
      float s = 0.f;
      for (int k = 0; k < 32; k++) s += float(xb[r * K + g * 32 + k]);
      xs[r * G + g] = s;
    }
  const auto* xp = reinterpret_cast<const uint32_t*>(xb);
  const uint8_t* cp = codes.data_ptr<uint8_t>();
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
#endif
