// Host-side numeric helpers for checking kiln kernels: IEEE binary16 (f16) and bfloat16 (bf16)
// rounding done with bit manipulation (no CUDA headers, so it builds without nvcc), and the
// relative L2 error used to compare a kernel's output with its CPU reference.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace kiln::ref {

inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// float -> binary16 bits, round to nearest, ties to even (what __float2half_rn does). Overflow
// goes to infinity, tiny values to f16 subnormals or signed zero, NaN stays a quiet NaN.
inline std::uint16_t f16_bits_from_float(float f) {
  const std::uint32_t x = float_bits(f);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t mag = x & 0x7fffffffu;
  if (mag > 0x7f800000u)  // NaN: quiet it, keep the top payload bits
    return static_cast<std::uint16_t>(sign | 0x7e00u | ((mag >> 13) & 0x3ffu));
  if (mag >= 0x477ff000u)  // >= 65520 (halfway from 65504 to 2^16, ties to even: up) or inf
    return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (mag >= 0x38800000u) {  // normal in f16 (>= 2^-14)
    const std::uint32_t exp = (mag >> 23) - 127u + 15u;
    const std::uint32_t mant = mag & 0x7fffffu;
    std::uint32_t h = (exp << 10) | (mant >> 13);
    const std::uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry bumps the exponent
    return static_cast<std::uint16_t>(sign | h);
  }
  const std::uint32_t e = mag >> 23;  // biased float exponent, <= 112 here
  if (e == 0) return sign;            // zero or float subnormal: far below f16's smallest value
  // Value = m * 2^(e - 150); in units of the f16 subnormal step 2^-24 that is m >> (126 - e).
  const std::uint32_t m = (mag & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126u - e;  // >= 14
  if (shift > 24u) return sign;          // below half the smallest subnormal
  std::uint32_t h = m >> shift;
  const std::uint32_t rest = m & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1u);
  if (rest > half || (rest == half && (h & 1u))) ++h;  // 0x400 is the smallest normal: correct
  return static_cast<std::uint16_t>(sign | h);
}

inline float float_from_f16_bits(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t mant = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in float
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_float(sign | 0x7f800000u | (mant << 13));  // inf or NaN
  return bits_float(sign | ((exp - 15u + 127u) << 23) | (mant << 13));
}

// float -> bfloat16 bits, round to nearest, ties to even (what __float2bfloat16_rn does).
inline std::uint16_t bf16_bits_from_float(float f) {
  const std::uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)  // NaN: quiet it
    return static_cast<std::uint16_t>((x >> 16) | 0x0040u);
  const std::uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>((x + rounding) >> 16);  // overflow lands on infinity
}

inline float float_from_bf16_bits(std::uint16_t b) {
  return bits_float(static_cast<std::uint32_t>(b) << 16);
}

// The float nearest to what storing v as f16 / bf16 keeps.
inline float round_to_f16(float v) { return float_from_f16_bits(f16_bits_from_float(v)); }
inline float round_to_bf16(float v) { return float_from_bf16_bits(bf16_bits_from_float(v)); }

inline void round_to_f16(std::vector<float>& v) {
  for (float& x : v) x = round_to_f16(x);
}
inline void round_to_bf16(std::vector<float>& v) {
  for (float& x : v) x = round_to_bf16(x);
}

// ||out - ref||_2 / ||ref||_2, accumulated in double. When ref is all zeros it is ||out||_2
// (so two zero vectors give 0). Mismatched sizes give +inf; a NaN anywhere gives NaN, which fails
// every `rel_l2(...) < tol` check.
inline double rel_l2(const std::vector<float>& out, const std::vector<float>& ref) {
  if (out.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double diff = 0.0;
  double norm = 0.0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double d = static_cast<double>(out[i]) - static_cast<double>(ref[i]);
    diff += d * d;
    norm += static_cast<double>(ref[i]) * static_cast<double>(ref[i]);
  }
  return norm > 0.0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

}  // namespace kiln::ref
