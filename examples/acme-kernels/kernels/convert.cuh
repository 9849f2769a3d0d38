// Element conversions shared by the acme kernels (a header: part of both families' source hash).
#pragma once
#include <cuda_fp16.h>

namespace acme {
__device__ inline float to_float(float v) { return v; }
__device__ inline float to_float(__half v) { return __half2float(v); }
template <typename T>
__device__ inline T from_float(float v);
template <>
__device__ inline float from_float<float>(float v) { return v; }
template <>
__device__ inline __half from_float<__half>(float v) { return __float2half(v); }
}  // namespace acme
