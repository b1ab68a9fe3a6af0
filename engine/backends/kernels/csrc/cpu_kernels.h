// What the kernels' source files call across files, and what cpu_decode.cpp's module exports
// (cpu_kernels.py builds them as one extension); and the int4 kernels' shared check of a
// matrix packed by torch_int4.pack_q4.
#pragma once
#include <torch/extension.h>

#include <vector>

torch::Tensor decode_attention(torch::Tensor q, torch::Tensor k, torch::Tensor v,
                               torch::Tensor lengths, double scale);  // cpu_decode.cpp
void attend_rows(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                 const torch::Tensor& lengths, const int64_t* slots, torch::Tensor& out,
                 double scale);
torch::Tensor prefill_attention(torch::Tensor q, torch::Tensor k, torch::Tensor v,
                                torch::Tensor mask, double scale);  // cpu_prefill.cpp
torch::Tensor rms_norm(torch::Tensor h, torch::Tensor w, double eps);  // cpu_block.cpp
torch::Tensor swiglu(torch::Tensor gu);
torch::Tensor decode_layer(torch::Tensor h, torch::Tensor in_norm, torch::Tensor post_norm,
                           std::vector<torch::Tensor> qkv, std::vector<torch::Tensor> o,
                           std::vector<torch::Tensor> gate_up, std::vector<torch::Tensor> down,
                           torch::Tensor pool_k, torch::Tensor pool_v, torch::Tensor slots,
                           torch::Tensor positions, torch::Tensor cos, torch::Tensor sin,
                           int64_t n_heads, int64_t n_kv_heads, double eps, int64_t dense_rows);
// codes [N/16, K/32, 4, 32] int16, d and m [N/16, K/32, 16] float16
inline void check_q4_packing(const torch::Tensor& codes, const torch::Tensor& d,
                             const torch::Tensor& m) {
  TORCH_CHECK(codes.scalar_type() == torch::kInt16 && codes.dim() == 4 && codes.is_contiguous());
  TORCH_CHECK(codes.size(2) == 4 && codes.size(3) == 32, "q4: codes are not pack_q4's");
  TORCH_CHECK(d.scalar_type() == torch::kHalf && m.scalar_type() == torch::kHalf);
  TORCH_CHECK(d.is_contiguous() && m.is_contiguous() && d.sizes() == m.sizes());
  TORCH_CHECK(d.dim() == 3 && d.size(0) == codes.size(0) && d.size(1) == codes.size(1) &&
              d.size(2) == 16);
}

#ifdef __AVX512BF16__
torch::Tensor q4_matvec(torch::Tensor x, torch::Tensor codes, torch::Tensor d,
                        torch::Tensor m);  // cpu_q4.cpp
void q4_weight_t(torch::Tensor codes, torch::Tensor d, torch::Tensor m, torch::Tensor out);
#endif
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define SERVEGATE_Q4_F32 1
torch::Tensor q4_matvec_f32(torch::Tensor x, torch::Tensor codes, torch::Tensor d,
                            torch::Tensor m);  // cpu_q4_f32.cpp
void q4_weight_t_f32(torch::Tensor codes, torch::Tensor d, torch::Tensor m, torch::Tensor out);
#endif
