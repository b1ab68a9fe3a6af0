// Shared by the engine's CPU kernels (cpu_kernels.py builds them): float32 or bfloat16 values
// as float32, by bits (a bfloat16 is a float32's upper half), so loops over them vectorize; the
// int4 kernels' group sums; and the head sizes the kernels are built for.
#pragma once
#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

inline float to_float(float x) { return x; }
inline float to_float(c10::BFloat16 x) {
  uint32_t bits = static_cast<uint32_t>(x.x) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// each row's sum over each group of 32 values (the int4 kernels' m*sum(x) term), x [M, K]
template <typename T>
std::vector<float> group_sums(const T* x, int64_t M, int64_t K) {
  std::vector<float> out(M * K / 32);
  for (size_t i = 0; i < out.size(); i++) {
    float s = 0.f;
    for (int k = 0; k < 32; k++) s += to_float(x[i * 32 + k]);
    out[i] = s;
  }
  return out;
}

template <typename T, int D>
inline void widen(const T* src, float* dst) {  // one row of D to float32
#pragma omp simd
  for (int d = 0; d < D; d++) dst[d] = to_float(src[d]);
}

// f(std::integral_constant<int, D>{}) for a head size D the kernels are built for
// (cpu_kernels.HEAD_DIMS): fixed trip counts vectorize fully.
template <typename F>
void with_head_dim(int64_t D, const char* kernel, F&& f) {
  switch (D) {
    case 16: return f(std::integral_constant<int, 16>{});
    case 32: return f(std::integral_constant<int, 32>{});
    case 64: return f(std::integral_constant<int, 64>{});
    case 128: return f(std::integral_constant<int, 128>{});
    default: TORCH_CHECK(false, kernel, ": head size ", D, " is not built");
  }
}
