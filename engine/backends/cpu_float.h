// Shared by the engine's CPU kernels (cpu_kernels.py builds them): a float32 or bfloat16 value
// as float32, by bits (a bfloat16 is a float32's upper half), so loops over it vectorize.
#pragma once
#include <c10/util/BFloat16.h>
#include <cstdint>
#include <cstring>

inline float to_float(float x) { return x; }
inline float to_float(c10::BFloat16 x) {
  uint32_t bits = static_cast<uint32_t>(x.x) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
