// The engine's fused decode block and its small ops, built with cpu_decode.cpp by
// cpu_kernels.py.
//
// decode_layer: one whole Llama block for a decode step of an int4 model (torch_llama.py's
// TransformerBlock) in the model's activations: bfloat16, rounded where torch rounds it, or
// float32 (CPUs without native bf16). The ~60 small torch ops between its four matmuls then
// cost no Python and no dispatch: they were half of a step. rms_norm and swiglu are also
// bfloat16 models' hooks (torch_llama.RMSNorm.kernel, MLP.swiglu).
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <cmath>
#include <type_traits>
#include <vector>

#include "cpu_common.h"
#include "cpu_kernels.h"

namespace {

using BF = at::BFloat16;

template <typename T>
inline float rnd(float x) {  // torch's rounding to T
  if constexpr (std::is_same_v<T, BF>) return static_cast<float>(BF(x));
  return x;
}

// Hugging Face's RMSNorm over the rows of h [N, D]: normalize in float32, round to T, scale.
template <typename T>
torch::Tensor rms_norm_t(const torch::Tensor& h, const torch::Tensor& w, double eps) {
  TORCH_CHECK(h.dim() == 2 && h.is_contiguous() && w.numel() == h.size(1));
  TORCH_CHECK(w.scalar_type() == h.scalar_type());
  const int64_t B = h.size(0), N = h.size(1);
  auto out = torch::empty_like(h);
  const T *hp = h.data_ptr<T>(), *wp = w.data_ptr<T>();
  T* op = out.data_ptr<T>();
  at::parallel_for(0, B, 16, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; b++) {
      const T* x = hp + b * N;
      float ss = 0.f;
      for (int64_t i = 0; i < N; i++) ss += float(x[i]) * float(x[i]);
      const float r = 1.f / std::sqrt(ss / N + static_cast<float>(eps));
      for (int64_t i = 0; i < N; i++) op[b * N + i] = T(float(wp[i]) * rnd<T>(float(x[i]) * r));
    }
  });
  return out;
}

// F.silu(gate) * up (each rounded to T) for gu [N, 2I] = [gate | up]; returns [N, I].
template <typename T>
torch::Tensor swiglu_t(const torch::Tensor& gu) {
  TORCH_CHECK(gu.dim() == 2 && gu.is_contiguous());
  const int64_t B = gu.size(0), I = gu.size(1) / 2;
  auto act = torch::empty({B, I}, gu.options());
  const T* gp = gu.data_ptr<T>();
  T* ap = act.data_ptr<T>();
  at::parallel_for(0, B, 16, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; b++)
      for (int64_t i = 0; i < I; i++) {
        const float g = float(gp[b * 2 * I + i]), u = float(gp[b * 2 * I + I + i]);
        ap[b * I + i] = T(rnd<T>(g / (1.f + std::exp(-g))) * u);
      }
  });
  return act;
}

// torch_int4.Int4Linear. Ours, {codes [N/16, K/32, 4, 32], d, m}: q4_matvec (bfloat16 x) or
// q4_matvec_f32 (float32 x), or past dense_rows rows a GEMM on W^T rebuilt per call. torch's,
// {packed [N, K/2], scales_and_zeros, dense}: its int4 kernel, or the bfloat16 copy.
template <typename T>
torch::Tensor project(const torch::Tensor& x, const std::vector<torch::Tensor>& p,
                      int64_t dense_rows) {
  if (p.size() == 3 && p[0].dim() == 4) {
    const bool many = x.size(0) > dense_rows;
    auto wt = many ? torch::empty({p[0].size(1) * 32, p[0].size(0) * 16}, x.options())
                   : torch::Tensor();
    if constexpr (std::is_same_v<T, float>) {
#ifdef SERVEGATE_Q4_F32
      if (!many) return q4_matvec_f32(x, p[0], p[1], p[2]);
      q4_weight_t_f32(p[0], p[1], p[2], wt);
      return at::matmul(x, wt);
#endif
    } else {
#ifdef __AVX512BF16__
      if (!many) return q4_matvec(x, p[0], p[1], p[2]);
      q4_weight_t(p[0], p[1], p[2], wt);
      return at::matmul(x, wt);
#endif
    }
    TORCH_CHECK(false, "decode_layer: our int4 kernel for these activations is not built");
  }
  TORCH_CHECK((std::is_same_v<T, BF>) && p.size() == 3 && p[0].dim() == 2,
              "decode_layer: a projection is {packed, scales_and_zeros, dense}");
  if (x.size(0) > dense_rows) return at::linear(x, p.back());
  return at::_weight_int4pack_mm_for_cpu(x, p[0], 32, p[1]);
}

// x*cos + roll(x, D/2)*sin_signed, each product and the sum rounded to T
template <typename T>
inline void rope(const T* x, const T* c, const T* s, int64_t D, T* out) {
  const int64_t half = D / 2;
  for (int64_t i = 0; i < D; i++) {
    const T rolled = x[i < half ? i + half : i - half];
    out[i] = T(rnd<T>(float(x[i]) * float(c[i])) + rnd<T>(float(rolled) * float(s[i])));
  }
}

template <typename P, typename T>
void store(P* dst, const T* src, int64_t D) {
  for (int64_t i = 0; i < D; i++) dst[i] = static_cast<P>(float(src[i]));
}

template <typename T>
torch::Tensor layer(torch::Tensor h, torch::Tensor in_norm, torch::Tensor post_norm,
                    const std::vector<torch::Tensor>& qkv, const std::vector<torch::Tensor>& o,
                    const std::vector<torch::Tensor>& gate_up,
                    const std::vector<torch::Tensor>& down, torch::Tensor pool_k,
                    torch::Tensor pool_v, const int64_t* sp, torch::Tensor positions,
                    torch::Tensor cos, torch::Tensor sin, int64_t H, int64_t KVH, double eps,
                    int64_t dense_rows) {
  const int64_t B = h.size(0), D = pool_k.size(3);
  const int64_t* pp = positions.data_ptr<int64_t>();
  const torch::Tensor x = project<T>(rms_norm_t<T>(h, in_norm, eps), qkv, dense_rows).contiguous();
  auto q = torch::empty({B, H, D}, h.options().dtype(torch::kFloat32));
  const T *xp = x.data_ptr<T>(), *cp = cos.data_ptr<T>(), *snp = sin.data_ptr<T>();
  const bool bf16_pool = pool_k.scalar_type() == torch::kBFloat16;
  std::vector<T> tmp(D);
  for (int64_t b = 0; b < B; b++) {
    const T* row = xp + b * (H + 2 * KVH) * D;
    for (int64_t hd = 0; hd < H; hd++) {
      rope(row + hd * D, cp + b * D, snp + b * D, D, tmp.data());
      store(q.data_ptr<float>() + (b * H + hd) * D, tmp.data(), D);
    }
    for (int64_t kv = 0; kv < KVH; kv++) {
      const int64_t ko = sp[b] * pool_k.stride(0) + kv * pool_k.stride(1) + pp[b] * D;
      const int64_t vo = sp[b] * pool_v.stride(0) + kv * pool_v.stride(1) + pp[b] * D;
      rope(row + (H + kv) * D, cp + b * D, snp + b * D, D, tmp.data());
      const T* v = row + (H + KVH + kv) * D;
      if (bf16_pool) {
        store(pool_k.data_ptr<BF>() + ko, tmp.data(), D);
        store(pool_v.data_ptr<BF>() + vo, v, D);
      } else {
        store(pool_k.data_ptr<float>() + ko, tmp.data(), D);
        store(pool_v.data_ptr<float>() + vo, v, D);
      }
    }
  }
  auto lengths = positions + 1;
  auto att = torch::empty_like(q);
  attend_rows(q, pool_k, pool_v, lengths, sp, att, 1.0 / std::sqrt(double(D)));
  auto h1 = h + project<T>(att.to(h.scalar_type()).view({B, H * D}), o, dense_rows);
  auto gu = project<T>(rms_norm_t<T>(h1, post_norm, eps), gate_up, dense_rows).contiguous();
  return h1 + project<T>(swiglu_t<T>(gu), down, dense_rows);
}

}  // namespace

// Hugging Face's RMSNorm in bfloat16 over the rows of h [N, D].
torch::Tensor rms_norm(torch::Tensor h, torch::Tensor w, double eps) {
  TORCH_CHECK(h.scalar_type() == torch::kBFloat16 && w.scalar_type() == torch::kBFloat16);
  return rms_norm_t<BF>(h, w, eps);
}

// F.silu(gate) * up in bfloat16 for gu [N, 2I] = [gate | up]; returns [N, I].
torch::Tensor swiglu(torch::Tensor gu) {
  TORCH_CHECK(gu.scalar_type() == torch::kBFloat16);
  return swiglu_t<BF>(gu);
}

// One TransformerBlock for B decode rows (one new token each) of an int4 model. h [B, hidden]
// bfloat16 or float32 (the norms, cos and sin alike); each projection as project() takes it;
// pool_k/v this layer's [slots, KVH, capacity, D] (float32 or bfloat16); row b writes its K/V
// at (slots[b], positions[b]) and attends positions 0..positions[b]; cos, sin [B, D] (sin
// signed).
torch::Tensor decode_layer(torch::Tensor h, torch::Tensor in_norm, torch::Tensor post_norm,
                           std::vector<torch::Tensor> qkv, std::vector<torch::Tensor> o,
                           std::vector<torch::Tensor> gate_up, std::vector<torch::Tensor> down,
                           torch::Tensor pool_k, torch::Tensor pool_v, torch::Tensor slots,
                           torch::Tensor positions, torch::Tensor cos, torch::Tensor sin,
                           int64_t n_heads, int64_t n_kv_heads, double eps, int64_t dense_rows) {
  const int64_t B = h.size(0), D = pool_k.size(3);
  const auto dt = h.scalar_type();
  TORCH_CHECK(dt == torch::kBFloat16 || dt == torch::kFloat32, "decode_layer: h's dtype");
  TORCH_CHECK(h.is_contiguous() && h.dim() == 2 && cos.scalar_type() == dt &&
              sin.scalar_type() == dt && in_norm.scalar_type() == dt &&
              post_norm.scalar_type() == dt);
  TORCH_CHECK(cos.is_contiguous() && sin.is_contiguous() && cos.size(1) == D);
  TORCH_CHECK(pool_k.stride(3) == 1 && pool_k.stride(2) == D && pool_v.stride(3) == 1 &&
              pool_v.stride(2) == D && pool_k.scalar_type() == pool_v.scalar_type());
  TORCH_CHECK(slots.dtype() == torch::kInt64 && positions.dtype() == torch::kInt64);
  const int64_t *sp = slots.data_ptr<int64_t>(), *pp = positions.data_ptr<int64_t>();
  for (int64_t b = 0; b < B; b++)
    TORCH_CHECK(sp[b] >= 0 && sp[b] < pool_k.size(0) && pp[b] >= 0 && pp[b] < pool_k.size(2),
                "decode_layer: slot or position out of range");
  if (dt == torch::kFloat32)
    return layer<float>(h, in_norm, post_norm, qkv, o, gate_up, down, pool_k, pool_v, sp,
                        positions, cos, sin, n_heads, n_kv_heads, eps, dense_rows);
  return layer<BF>(h, in_norm, post_norm, qkv, o, gate_up, down, pool_k, pool_v, sp, positions,
                   cos, sin, n_heads, n_kv_heads, eps, dense_rows);
}
