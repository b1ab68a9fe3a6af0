// Decode attention on CPU: one query token per row, grouped-query heads, over a KV pool of
// float32 or bfloat16 (widened to float32 in registers: no bf16 arithmetic, so any CPU).
// One task per (row, KV head): its H/KVH query heads share each K and V read. Two passes
// (scores, then softmax-weighted V) keep each read once; SDPA's flash kernel read the same
// bytes at half the rate for one query (docs/performance.md). Built by cpu_kernels.py.
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

namespace {

constexpr int MAX_GROUP = 16;

inline float to_float(float x) { return x; }
inline float to_float(at::BFloat16 x) {
  uint32_t bits = static_cast<uint32_t>(x.x) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// D is a template argument for the common head sizes (fixed trip counts vectorize fully)
template <typename T, int D>
void attend(const float* qp, const T* kp, const T* vp, const int64_t* lp, float* op,
            int64_t W, int64_t H, int64_t KVH, int64_t ksw, int64_t ksh, int64_t vsw,
            int64_t vsh, float scale) {
  const int64_t g = H / KVH;
  at::parallel_for(0, W * KVH, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> sc;
    for (int64_t t = begin; t < end; t++) {
      const int64_t w = t / KVH, kvh = t % KVH, n = lp[w];
      const T* kb = kp + w * ksw + kvh * ksh;
      const T* vb = vp + w * vsw + kvh * vsh;
      const float* q0 = qp + (w * H + kvh * g) * D;
      sc.resize(g * n);
      for (int64_t s = 0; s < n; s++) {
        float kr[D];
        const T* ks = kb + s * D;
#pragma omp simd
        for (int d = 0; d < D; d++) kr[d] = to_float(ks[d]);
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
        const T* vs = vb + s * D;
#pragma omp simd
        for (int d = 0; d < D; d++) vr[d] = to_float(vs[d]);
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
void dispatch(int64_t D, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
              const torch::Tensor& lens, torch::Tensor& out, double scale) {
  auto run = [&](auto d) {
    attend<T, decltype(d)::value>(q.data_ptr<float>(), k.data_ptr<T>(), v.data_ptr<T>(),
                                  lens.data_ptr<int64_t>(), out.data_ptr<float>(), q.size(0),
                                  q.size(1), k.size(1), k.stride(0), k.stride(1), v.stride(0),
                                  v.stride(1), scale);
  };
  switch (D) {  // cpu_kernels.HEAD_DIMS
    case 16: return run(std::integral_constant<int, 16>{});
    case 32: return run(std::integral_constant<int, 32>{});
    case 64: return run(std::integral_constant<int, 64>{});
    case 128: return run(std::integral_constant<int, 128>{});
    default: TORCH_CHECK(false, "decode_attention: head size ", D, " is not built");
  }
}

}  // namespace

// q [W, H, D] float32; k, v [W, KVH, S, D] float32 or bfloat16 with contiguous rows of D;
// lengths [W] int64 (row w attends keys 0..lengths[w]-1). Returns [W, H, D] float32.
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
  if (k.dtype() == torch::kBFloat16) {
    dispatch<at::BFloat16>(D, q, k, v, lens, out, scale);
  } else {
    TORCH_CHECK(k.dtype() == torch::kFloat32, "decode_attention: K/V must be float32 or bfloat16");
    dispatch<float>(D, q, k, v, lens, out, scale);
  }
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  // the GIL is released while it runs: the server's event loop keeps serving
  m.def("decode_attention", &decode_attention,
        pybind11::call_guard<pybind11::gil_scoped_release>());
}
