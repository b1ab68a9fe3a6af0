// The engine's CPU decode kernels, built by cpu_kernels.py.
//
// decode_attention: one query token per row, grouped-query heads, over a KV pool of float32 or
// bfloat16 (widened to float32 in registers; a bfloat16 pool's scores by vdpbf16ps where the
// CPU has it, exact products of q's bfloat16 values). One task per (row, KV head): its H/KVH
// query heads share each K and V read. Two passes (scores, then softmax-weighted V) keep each
// read once; SDPA's flash kernel read the same bytes at half the rate for one query.
// The module's other functions live in cpu_prefill.cpp, cpu_q4.cpp, cpu_q4_f32.cpp and
// cpu_block.cpp (the fused decode block, RMSNorm and SwiGLU).
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "cpu_common.h"
#ifdef __AVX512BF16__
#include <immintrin.h>
#endif

#include "cpu_kernels.h"

namespace {

constexpr int MAX_GROUP = 16;

#ifdef __AVX512BF16__
// The scores of one query head against n bfloat16 keys (rows of D, contiguous), 16 keys at a
// time: vdpbf16ps multiplies two dims per lane exactly and adds in float32, then a transpose
// tree sums each key's 16 lanes. q must hold bfloat16 values (the engine's q does: it is the
// bfloat16 projection's output); it is taken as is, never rounded further.
template <int D>
void scores16(const float* q, const at::BFloat16* k, int64_t n, float scale, float* out) {
  constexpr int NC = (D + 31) / 32;  // 32 dims (16 pairs) per vector
  constexpr __mmask32 TAIL = D % 32 ? (1u << (D % 32)) - 1 : ~0u;
  __m512bh qv[NC];
  for (int c = 0; c < NC; c++) {
    const int w = c == NC - 1 && D % 32 ? D % 32 : 32;
    const __mmask16 lo = w >= 16 ? 0xFFFF : (1u << w) - 1, hi = w > 16 ? (1u << (w - 16)) - 1 : 0;
    qv[c] = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, q + c * 32 + 16),
                                _mm512_maskz_loadu_ps(lo, q + c * 32));
  }
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  for (int64_t s0 = 0; s0 < n; s0 += 16) {
    __m512 v[16];
    for (int j = 0; j < 16; j++) {
      v[j] = _mm512_setzero_ps();
      if (s0 + j >= n) continue;
      const at::BFloat16* kr = k + (s0 + j) * D;
      for (int c = 0; c < NC; c++) {
        const __mmask32 m = c == NC - 1 ? TAIL : ~0u;
        const __m512bh kv = (__m512bh)_mm512_maskz_loadu_epi16(m, kr + c * 32);
        v[j] = _mm512_dpbf16_ps(v[j], qv[c], kv);
      }
    }
    __m512 t[8], u[4], w[2];  // 16 vectors -> one, lane i the sum of a key's lanes
    for (int i = 0; i < 8; i++)
      t[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44),
                           _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xEE));
    for (int i = 0; i < 4; i++)
      u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * i], t[2 * i + 1], 0x88),
                           _mm512_shuffle_f32x4(t[2 * i], t[2 * i + 1], 0xDD));
    for (int i = 0; i < 2; i++)
      w[i] = _mm512_add_ps(_mm512_shuffle_ps(u[2 * i], u[2 * i + 1], 0x44),
                           _mm512_shuffle_ps(u[2 * i], u[2 * i + 1], 0xEE));
    const __m512 x = _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], 0x88),
                                   _mm512_shuffle_ps(w[0], w[1], 0xDD));
    const __m512 sums = _mm512_mul_ps(_mm512_permutexvar_ps(order, x), _mm512_set1_ps(scale));
    const int64_t left = n - s0;
    _mm512_mask_storeu_ps(out + s0, left >= 16 ? 0xFFFF : (1u << left) - 1, sums);
  }
}
#endif

// D is a template argument for the common head sizes (fixed trip counts vectorize fully)
// Row w reads the pool's slot slots[w] (w itself when slots is null).
template <typename T, int D>
void attend(const float* qp, const T* kp, const T* vp, const int64_t* lp, const int64_t* slots,
            float* op, int64_t W, int64_t H, int64_t KVH, int64_t ksw, int64_t ksh, int64_t vsw,
            int64_t vsh, float scale) {
  const int64_t g = H / KVH;
  at::parallel_for(0, W * KVH, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> sc;
    for (int64_t t = begin; t < end; t++) {
      const int64_t w = t / KVH, kvh = t % KVH, n = lp[w], slot = slots ? slots[w] : w;
      const T* kb = kp + slot * ksw + kvh * ksh;
      const T* vb = vp + slot * vsw + kvh * vsh;
      const float* q0 = qp + (w * H + kvh * g) * D;
      sc.resize(g * n);
#ifdef __AVX512BF16__
      if constexpr (std::is_same_v<T, at::BFloat16>) {
        for (int64_t r = 0; r < g; r++) scores16<D>(q0 + r * D, kb, n, scale, sc.data() + r * n);
      } else
#endif
      for (int64_t s = 0; s < n; s++) {
        float kr[D];
        widen<T, D>(kb + s * D, kr);
        for (int64_t r = 0; r < g; r++) {
          const float* qv = q0 + r * D;
          float acc = 0.f;
#pragma omp simd reduction(+ : acc)
          for (int d = 0; d < D; d++) acc += qv[d] * kr[d];
          sc[r * n + s] = acc * scale;
        }
      }
      for (int64_t r = 0; r < g; r++) {
        float* srow = sc.data() + r * n;
        float mx = srow[0];  // n >= 1; no infinities under -ffast-math
        for (int64_t s = 1; s < n; s++) mx = srow[s] > mx ? srow[s] : mx;
        float sum = 0.f;
#pragma omp simd reduction(+ : sum)
        for (int64_t s = 0; s < n; s++) {
          const float e = expf(srow[s] - mx);
          srow[s] = e;
          sum += e;
        }
        const float inv = 1.f / sum;
        for (int64_t s = 0; s < n; s++) srow[s] *= inv;
      }
      float o[MAX_GROUP][D] = {{0}};
      for (int64_t s = 0; s < n; s++) {
        float vr[D];
        widen<T, D>(vb + s * D, vr);
        for (int64_t r = 0; r < g; r++) {
          const float p = sc[r * n + s];
#pragma omp simd
          for (int d = 0; d < D; d++) o[r][d] += p * vr[d];
        }
      }
      for (int64_t r = 0; r < g; r++) std::memcpy(op + (w * H + kvh * g + r) * D, o[r], D * 4);
    }
  });
}

template <typename T>
void dispatch_d(int64_t D, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                const torch::Tensor& lens, const int64_t* slots, torch::Tensor& out,
                double scale) {
  with_head_dim(D, "decode_attention", [&](auto d) {
    attend<T, decltype(d)::value>(q.data_ptr<float>(), k.data_ptr<T>(), v.data_ptr<T>(),
                                  lens.data_ptr<int64_t>(), slots, out.data_ptr<float>(),
                                  q.size(0), q.size(1), k.size(1), k.stride(0), k.stride(1),
                                  v.stride(0), v.stride(1), scale);
  });
}

// attend() for the pool's dtype and the head size
void dispatch(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
              const torch::Tensor& lens, const int64_t* slots, torch::Tensor& out, double scale) {
  if (k.scalar_type() == torch::kBFloat16)
    return dispatch_d<at::BFloat16>(q.size(2), q, k, v, lens, slots, out, scale);
  TORCH_CHECK(k.scalar_type() == torch::kFloat32,
              "decode_attention: K/V must be float32 or bfloat16");
  dispatch_d<float>(q.size(2), q, k, v, lens, slots, out, scale);
}

}  // namespace

// q [W, H, D] float32 (holding bfloat16 values, with a bfloat16 pool); k, v [W, KVH, S, D]
// float32 or bfloat16 with contiguous rows of D; lengths [W] int64 (row w attends keys
// 0..lengths[w]-1). Returns [W, H, D] float32.
torch::Tensor decode_attention(torch::Tensor q, torch::Tensor k, torch::Tensor v,
                               torch::Tensor lengths, double scale) {
  const int64_t W = q.size(0), H = q.size(1), D = q.size(2), KVH = k.size(1);
  TORCH_CHECK(q.dtype() == torch::kFloat32 && q.is_contiguous());
  TORCH_CHECK(k.dtype() == v.dtype() && k.size(3) == D && v.size(3) == D);
  TORCH_CHECK(k.stride(3) == 1 && k.stride(2) == D && v.stride(3) == 1 && v.stride(2) == D);
  TORCH_CHECK(H % KVH == 0 && H / KVH <= MAX_GROUP && k.size(0) == W && v.size(0) == W);
  TORCH_CHECK(lengths.dtype() == torch::kInt64 && lengths.size(0) == W);
  auto lens = lengths.contiguous();
  for (int64_t w = 0; w < W; w++) {
    const int64_t n = lens.data_ptr<int64_t>()[w];
    TORCH_CHECK(n >= 1 && n <= k.size(2) && n <= v.size(2),
                "decode_attention: length out of range");
  }
  auto out = torch::empty_like(q);
  dispatch(q, k, v, lens, nullptr, out, scale);
  return out;
}

// attend() over a KV pool for rows that read pool slots[w] (cpu_block.cpp's decode_layer)
void attend_rows(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                 const torch::Tensor& lengths, const int64_t* slots, torch::Tensor& out,
                 double scale) {
  dispatch(q, k, v, lengths, slots, out, scale);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  // the GIL is released while it runs: the server's event loop keeps serving
  m.def("decode_attention", &decode_attention,
        pybind11::call_guard<pybind11::gil_scoped_release>());
  m.def("decode_layer", &decode_layer, pybind11::call_guard<pybind11::gil_scoped_release>());
  m.def("prefill_attention", &prefill_attention,
        pybind11::call_guard<pybind11::gil_scoped_release>());
  m.def("rms_norm", &rms_norm, pybind11::call_guard<pybind11::gil_scoped_release>());
  m.def("swiglu", &swiglu, pybind11::call_guard<pybind11::gil_scoped_release>());
#ifdef __AVX512BF16__
  m.def("q4_matvec", &q4_matvec, pybind11::call_guard<pybind11::gil_scoped_release>());
  m.def("q4_weight_t", &q4_weight_t, pybind11::call_guard<pybind11::gil_scoped_release>());
#endif
#ifdef SERVEGATE_Q4_F32
  m.def("q4_matvec_f32", &q4_matvec_f32, pybind11::call_guard<pybind11::gil_scoped_release>());
  m.def("q4_weight_t_f32", &q4_weight_t_f32,
        pybind11::call_guard<pybind11::gil_scoped_release>());
#endif
}
