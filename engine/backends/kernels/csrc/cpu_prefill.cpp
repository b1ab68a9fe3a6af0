// The engine's CPU prefill attention, built with cpu_decode.cpp by cpu_kernels.py.
//
// prefill_attention: SDPA with an additive mask [B, 1, L, S] for grouped-query heads over
// float32 or bfloat16 Q/K/V, K and V laid out in tiles once per call (cpu_prefill_tiles.h:
// float32 arithmetic, or bfloat16 products by vdpbf16ps where the CPU has it). The mask
// is read, not assumed: each query position attends the keys between its first and last
// unhidden mask entry, with the mask's values added, so a causal or right-padded mask skips the
// keys it hides (torch's flash kernel computes every key below its 512-key block). One task per
// (batch row, KV head, QT query positions), its H/KVH query heads sharing each K and V tile;
// online softmax over key tiles; tasks taken costliest first from a shared counter.
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "cpu_prefill_tiles.h"

namespace {

using namespace prefill;

// Each query position's span of keys: from its first to its last unhidden mask entry.
template <typename T>
void key_spans(const T* mp, const Shape& s, std::vector<int32_t>& lo, std::vector<int32_t>& hi) {
  lo.assign(s.B * s.L, 0), hi.assign(s.B * s.L, 0);
  at::parallel_for(0, s.B * s.L, 64, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; t++) {
      const T* m = mp + (t / s.L) * s.ms[0] + (t % s.L) * s.ms[1];
      int64_t a = 0, e = s.S;
      while (a < e && hidden(m[a])) a++;
      while (e - 16 >= a) {  // a causal row hides its tail: step over it 16 at a time
        bool all = true;
        for (int j = 1; j <= 16; j++) all &= hidden(m[e - j]);
        if (!all) break;
        e -= 16;
      }
      while (e > a && hidden(m[e - 1])) e--;
      lo[t] = a, hi[t] = e;
    }
  });
}

// One row's scores against a tile of keys k0.., masked: outside keys [a, e) of the tile, or
// under a hidden mask entry, a score is HIDDEN; inside, the mask's value is added.
template <typename T>
inline void mask_scores(float* sc, const T* m, int a, int e, int n) {
  alignas(64) float mv[KT];
  for (int j = 0; j < n; j++) mv[j] = to_float(m[j]);  // no read past the mask's row
  for (int j = n; j < KT; j++) mv[j] = HIDDEN;
#pragma omp simd
  for (int j = 0; j < KT; j++) {
    const bool in = j >= a && j < e && mv[j] >= -1e30f;
    sc[j] = in ? sc[j] + mv[j] : HIDDEN;
  }
}

// One task: positions [i0, i1) of query heads kvh*g .. kvh*g+g-1 of batch row b. Its rows
// (head, position) go in blocks of RB, each block's scores and outputs held in registers.
template <typename T, int D>
void attend_tile(const T* qp, const Widened& w, const T* mp, const int32_t* span_lo,
                 const int32_t* span_hi, T* op, const Shape& s, int64_t b, int64_t kvh,
                 int64_t i0, int64_t i1, float scale) {
  constexpr int RB = D >= 128 ? 2 : 4, DV = D / V, KV = KT / V;
  static_assert(QT % RB == 0 && KT % V == 0 && D % V == 0);
  const int64_t g = s.H / s.KVH, R = i1 - i0, rows = g * QT;
  int64_t lo[QT], hi[QT], tlo = s.S, thi = 0;  // positions past R: no keys
  const T* mrow[QT];
  for (int64_t r = 0; r < QT; r++) {
    mrow[r] = mp + b * s.ms[0] + (i0 + std::min(r, R - 1)) * s.ms[1];
    lo[r] = r < R ? span_lo[b * s.L + i0 + r] : 0;
    hi[r] = r < R ? span_hi[b * s.L + i0 + r] : 0;
    if (r < R) tlo = std::min(tlo, lo[r]), thi = std::max(thi, hi[r]);
  }
  std::vector<float> buf(2 * rows * D + 2 * rows + 16);
  float* q = align64(buf.data());
  float *o = q + rows * D, *mx = o + rows * D, *sum = mx + rows;
  std::fill(q, q + 2 * rows * D, 0.f);
  std::fill(mx, mx + rows, HIDDEN);
  std::fill(sum, sum + rows, 0.f);
  uint32_t* q2 = reinterpret_cast<uint32_t*>(q);  // DOT16: bf16 pairs, D/2 per row
  for (int64_t h = 0; h < g; h++)
    for (int64_t r = 0; r < R; r++) {
      const T* src = qp + b * s.qs[0] + (kvh * g + h) * s.qs[1] + (i0 + r) * s.qs[2];
      if constexpr (DOT16<T>) {
        for (int d = 0; d < D; d += 2)
          q2[(h * QT + r) * (D / 2) + d / 2] = src[d].x | uint32_t(src[d + 1].x) << 16;
      } else {
        for (int d = 0; d < D; d++) q[(h * QT + r) * D + d] = to_float(src[d]) * scale;
      }
    }
  const int64_t SP = w.SP, t = b * s.KVH + kvh;
  alignas(64) float sc[RB][KT];
  for (int64_t k0 = tlo - tlo % KT; k0 < thi; k0 += KT) {
    const int64_t n = std::min<int64_t>(KT, thi - k0);
    for (int64_t r0 = 0; r0 < rows; r0 += RB) {
      const int64_t p0 = r0 % QT;  // the block's first position (a block is one head's)
      bool any = false;
      for (int rr = 0; rr < RB; rr++) any |= k0 < hi[p0 + rr] && k0 + KT > lo[p0 + rr];
      if (!any) continue;
#ifdef __AVX512BF16__
      if constexpr (DOT16<T>)
        scores16<D, RB>(q2 + r0 * (D / 2), w.k2 + t * D * SP, SP, k0, scale, sc);
      else
#endif
      {
        const float* ktb = w.kt + t * D * SP;
        vf acc[RB][KV] = {};
        for (int d = 0; d < D; d++) {
          vf kd[KV];
          for (int c = 0; c < KV; c++) kd[c] = lanes(ktb + d * SP + k0 + c * V);
          for (int rr = 0; rr < RB; rr++) {
            const vf qd = splat(q[(r0 + rr) * D + d]);
            for (int c = 0; c < KV; c++) acc[rr][c] += qd * kd[c];
          }
        }
        for (int rr = 0; rr < RB; rr++)
          for (int c = 0; c < KV; c++) lanes(&sc[rr][c * V]) = acc[rr][c];
      }
      for (int rr = 0; rr < RB; rr++) {
        const int a = std::max<int64_t>(lo[p0 + rr] - k0, 0);
        const int e = std::clamp<int64_t>(hi[p0 + rr] - k0, 0, n);
        mask_scores(sc[rr], mrow[p0 + rr] + k0, a, e, n);
      }
      float alpha[RB];
      for (int rr = 0; rr < RB; rr++) {
        const int64_t row = r0 + rr;
        float tmax = HIDDEN;
#pragma omp simd reduction(max : tmax)
        for (int j = 0; j < KT; j++) tmax = std::max(tmax, sc[rr][j]);
        if (tmax <= HIDDEN) {  // no key of this tile: nothing changes
          alpha[rr] = 1.f;
          for (int j = 0; j < KT; j++) sc[rr][j] = 0.f;
          continue;
        }
        const float m_new = std::max(mx[row], tmax);
        alpha[rr] = expf(mx[row] - m_new);
        float tsum = 0.f;
#pragma omp simd reduction(+ : tsum)
        for (int j = 0; j < KT; j++) {  // exp of a hidden score's -1e30 would take libm's
          const float x = sc[rr][j];      // slow underflow path: clamp, then zero it
          sc[rr][j] = x > HIDDEN ? expf(std::max(x - m_new, -80.f)) : 0.f;
          tsum += sc[rr][j];
        }
        mx[row] = m_new, sum[row] = sum[row] * alpha[rr] + tsum;
      }
      vf oacc[RB][DV];
      for (int rr = 0; rr < RB; rr++)
        for (int c = 0; c < DV; c++) oacc[rr][c] = lanes(&o[(r0 + rr) * D + c * V]) * alpha[rr];
#ifdef __AVX512BF16__
      if constexpr (DOT16<T>)
        accumulate16<D, RB>(oacc, sc, w.v2 + t * D * SP, k0, n);
      else
#endif
      {
        const float* vb = w.v + t * D * SP;
        for (int64_t j = 0; j < n; j++) {
          vf vj[DV];
          for (int c = 0; c < DV; c++) vj[c] = lanes(vb + (k0 + j) * D + c * V);
          for (int rr = 0; rr < RB; rr++) {
            const vf pj = splat(sc[rr][j]);
            for (int c = 0; c < DV; c++) oacc[rr][c] += pj * vj[c];
          }
        }
      }
      for (int rr = 0; rr < RB; rr++)
        for (int c = 0; c < DV; c++) lanes(&o[(r0 + rr) * D + c * V]) = oacc[rr][c];
    }
  }
  for (int64_t h = 0; h < g; h++)
    for (int64_t r = 0; r < R; r++) {
      const int64_t row = h * QT + r;
      T* dst = op + b * s.os[0] + (kvh * g + h) * s.os[1] + (i0 + r) * s.os[2];
      store_row(o + row * D, 1.f / sum[row], dst, D);
    }
}

template <typename T, int D>
void run(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
         const torch::Tensor& mask, torch::Tensor& out, const Shape& s, float scale) {
  Widened w;
  widen_kv<T, D>(k.data_ptr<T>(), v.data_ptr<T>(), s, w);
  std::vector<int32_t> lo, hi;
  key_spans(mask.data_ptr<T>(), s, lo, hi);
  const int64_t tiles = (s.L + QT - 1) / QT, n = s.B * s.KVH * tiles;
  std::vector<int64_t> order(n);  // costliest (latest) tiles first
  for (int64_t t = 0; t < n; t++) order[t] = t;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t c) { return a % tiles > c % tiles; });
  std::atomic<int64_t> next{0};
  const T *qp = q.data_ptr<T>(), *mp = mask.data_ptr<T>();
  T* op = out.data_ptr<T>();
  at::parallel_for(0, at::get_num_threads(), 1, [&](int64_t, int64_t) {
    for (int64_t i; (i = next.fetch_add(1)) < n;) {
      const int64_t t = order[i], tile = t % tiles, bk = t / tiles;
      const int64_t i0 = tile * QT, i1 = std::min(s.L, i0 + QT);
      attend_tile<T, D>(qp, w, mp, lo.data(), hi.data(), op, s, bk / s.KVH, bk % s.KVH, i0, i1,
                        scale);
    }
  });
}

template <typename T>
void dispatch(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
              const torch::Tensor& mask, torch::Tensor& out, const Shape& s, float scale) {
  with_head_dim(q.size(3), "prefill_attention",
                [&](auto d) { run<T, decltype(d)::value>(q, k, v, mask, out, s, scale); });
}

}  // namespace

// q [B, H, L, D]; k, v [B, KVH, S, D]; mask [B, 1, L, S] additive (-inf hides a key), all one
// dtype (float32 or bfloat16), each with contiguous rows of D. Returns [B, H, L, D] in that
// dtype: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True), computed in
// float32. Every query row must see at least one key.
torch::Tensor prefill_attention(torch::Tensor q, torch::Tensor k, torch::Tensor v,
                                torch::Tensor mask, double scale) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && mask.dim() == 4);
  const int64_t B = q.size(0), H = q.size(1), L = q.size(2), D = q.size(3);
  const int64_t KVH = k.size(1), S = k.size(2);
  TORCH_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type() &&
                  mask.scalar_type() == q.scalar_type(),
              "prefill_attention: q, k, v and mask must share one dtype");
  TORCH_CHECK(k.size(0) == B && v.size(0) == B && v.size(1) == KVH && v.size(2) == S);
  TORCH_CHECK(k.size(3) == D && v.size(3) == D && H % KVH == 0);
  TORCH_CHECK(mask.size(0) == B && mask.size(1) == 1 && mask.size(2) == L && mask.size(3) == S);
  TORCH_CHECK(q.stride(3) == 1 && k.stride(3) == 1 && v.stride(3) == 1 && mask.stride(3) == 1,
              "prefill_attention: rows of D (and mask rows) must be contiguous");
  auto out = torch::empty({B, H, L, D}, q.options());
  if (out.numel() == 0) return out;
  const Shape s{B,
                H,
                KVH,
                L,
                S,
                {q.stride(0), q.stride(1), q.stride(2)},
                {k.stride(0), k.stride(1), k.stride(2)},
                {v.stride(0), v.stride(1), v.stride(2)},
                {mask.stride(0), mask.stride(2)},
                {out.stride(0), out.stride(1), out.stride(2)}};
  if (q.scalar_type() == torch::kBFloat16)
    dispatch<at::BFloat16>(q, k, v, mask, out, s, static_cast<float>(scale));
  else {
    TORCH_CHECK(q.scalar_type() == torch::kFloat32, "prefill_attention: float32 or bfloat16");
    dispatch<float>(q, k, v, mask, out, s, static_cast<float>(scale));
  }
  return out;
}
