// The K/V tiles of cpu_prefill.cpp's attention and their two products (scores, P.V) with
// vdpbf16ps; included by cpu_prefill.cpp only (cpu_kernels.py copies it beside the sources).
#pragma once
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "cpu_common.h"
#ifdef __AVX512BF16__
#include <immintrin.h>
#endif

namespace prefill {

constexpr int QT = 32;          // query positions per task
constexpr int KT = 32;          // keys per tile
constexpr float HIDDEN = -1e30f;  // a masked score (finite: the kernels build with -ffast-math)

template <typename T>
inline bool hidden(T m) {  // -inf (or any huge negative) hides a key
  return to_float(m) < -1e30f;
}

template <typename T>
void store_row(const float* src, float scale, T* dst, int D) {
  for (int d = 0; d < D; d++) dst[d] = static_cast<T>(src[d] * scale);
}

struct Shape {
  int64_t B, H, KVH, L, S;
  int64_t qs[3], ks[3], vs[3], ms[2], os[3];  // strides: batch, head, position (mask: b, i)
};

typedef float vf __attribute__((vector_size(64)));  // 16 floats: AVX-512, or two AVX2 halves
constexpr int V = 16;
inline vf splat(float x) { return vf{} + x; }
inline vf& lanes(float* p) { return *reinterpret_cast<vf*>(p); }  // p 64-byte aligned
inline const vf& lanes(const float* p) { return *reinterpret_cast<const vf*>(p); }

#ifdef __AVX512BF16__
template <typename T>
constexpr bool DOT16 = std::is_same_v<T, at::BFloat16>;  // bf16 pair dot products (vdpbf16ps)
#else
template <typename T>
constexpr bool DOT16 = false;
#endif

// This call's K and V, laid out once for the tiles: float32 K transposed [B*KVH][D][SP] and V
// [B*KVH][SP][D]; or, for vdpbf16ps, bfloat16 pairs: K [B*KVH][D/2][SP][2] (a key's two
// adjacent dims) and V [B*KVH][SP/2][D][2] (two adjacent keys' values).
struct Widened {
  int64_t SP;  // S rounded up to whole tiles (zeros past S)
  std::vector<float> buf;
  std::vector<uint16_t> hbuf;
  float *kt = nullptr, *v = nullptr;
  uint16_t *k2 = nullptr, *v2 = nullptr;
};

template <typename U>
U* align64(U* p) {
  return reinterpret_cast<U*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t(63));
}

template <typename T, int D>
void widen_kv(const T* kp, const T* vp, const Shape& s, Widened& w) {
  w.SP = (s.S + KT - 1) / KT * KT;
  const int64_t per = D * w.SP, n = s.B * s.KVH, SP = w.SP;
  if constexpr (DOT16<T>) {
    w.hbuf.assign(2 * n * per + 32, 0);
    w.k2 = align64(w.hbuf.data()), w.v2 = w.k2 + n * per;
  } else {
    w.buf.assign(2 * n * per + 16, 0.f);
    w.kt = align64(w.buf.data()), w.v = w.kt + n * per;
  }
  at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; t++) {
      const T* kb = kp + (t / s.KVH) * s.ks[0] + (t % s.KVH) * s.ks[1];
      const T* vb = vp + (t / s.KVH) * s.vs[0] + (t % s.KVH) * s.vs[1];
      for (int64_t j = 0; j < s.S; j++) {
        const T *kr = kb + j * s.ks[2], *vr = vb + j * s.vs[2];
        if constexpr (DOT16<T>) {
          uint16_t *k2 = w.k2 + t * per, *v2 = w.v2 + t * per;
          for (int d = 0; d < D; d++) k2[((d / 2) * SP + j) * 2 + d % 2] = kr[d].x;
          for (int d = 0; d < D; d++) v2[((j / 2) * D + d) * 2 + j % 2] = vr[d].x;
        } else {
          float *kt = w.kt + t * per, *v = w.v + t * per;
          for (int d = 0; d < D; d++) kt[d * SP + j] = to_float(kr[d]);
          widen<T, D>(vr, v + j * D);
        }
      }
    }
  });
}

#ifdef __AVX512BF16__
// Scores of RB query rows (bf16 pairs, q2[row][D/2]) against keys k0..k0+KT: vdpbf16ps takes
// two dims of a key per lane, so half the multiply-adds of float32.
template <int D, int RB>
inline void scores16(const uint32_t* q2, const uint16_t* k2, int64_t SP, int64_t k0, float scale,
                     float (&sc)[RB][KT]) {
  constexpr int KV = KT / V;
  __m512 acc[RB][KV];
  for (int rr = 0; rr < RB; rr++)
    for (int c = 0; c < KV; c++) acc[rr][c] = _mm512_setzero_ps();
  for (int dp = 0; dp < D / 2; dp++) {
    __m512bh kd[KV];
    for (int c = 0; c < KV; c++)
      kd[c] = (__m512bh)_mm512_load_si512(k2 + (dp * SP + k0 + c * V) * 2);
    for (int rr = 0; rr < RB; rr++) {
      const __m512bh qd = (__m512bh)_mm512_set1_epi32(q2[rr * (D / 2) + dp]);
      for (int c = 0; c < KV; c++) acc[rr][c] = _mm512_dpbf16_ps(acc[rr][c], qd, kd[c]);
    }
  }
  for (int rr = 0; rr < RB; rr++)
    for (int c = 0; c < KV; c++)
      _mm512_store_ps(&sc[rr][c * V], _mm512_mul_ps(acc[rr][c], _mm512_set1_ps(scale)));
}

// o += p V over keys k0..k0+n, p rounded to bfloat16 (as torch's flash kernel rounds it) and
// taken two keys per lane.
template <int D, int RB>
inline void accumulate16(vf (&oacc)[RB][D / V], const float (&sc)[RB][KT], const uint16_t* v2,
                         int64_t k0, int64_t n) {
  alignas(64) uint32_t pb[RB][KT / 2];
  for (int rr = 0; rr < RB; rr++)
    for (int c = 0; c < KT / V; c++)
      _mm256_store_si256(reinterpret_cast<__m256i*>(&pb[rr][c * V / 2]),
                         (__m256i)_mm512_cvtneps_pbh(_mm512_load_ps(&sc[rr][c * V])));
  for (int64_t jp = 0; jp < (n + 1) / 2; jp++) {
    __m512bh vv[D / V];
    for (int c = 0; c < D / V; c++)
      vv[c] = (__m512bh)_mm512_load_si512(v2 + ((k0 / 2 + jp) * D + c * V) * 2);
    for (int rr = 0; rr < RB; rr++) {
      const __m512bh pj = (__m512bh)_mm512_set1_epi32(pb[rr][jp]);
      for (int c = 0; c < D / V; c++)
        oacc[rr][c] = (vf)_mm512_dpbf16_ps((__m512)oacc[rr][c], pj, vv[c]);
    }
  }
}
#endif

}  // namespace prefill
