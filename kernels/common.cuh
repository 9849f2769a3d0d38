// Shared device helpers for every kiln kernel family.
//
// Rules for everything under kernels/ (the loader JIT-compiles these same files with NVRTC):
// device code only; includes limited to other kernels/ files, <cuda_fp16.h> and <cuda_bf16.h>;
// no std headers (NVRTC has none), no printf, no assert; integer template parameters are `int`
// so that demangled names read `kiln::foo<float, 128>` (not `128u`).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace kiln {

// ---- dtype conversion: every kernel accumulates in float -------------------------------------

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

// Round-to-nearest-even conversion from float to the storage type.
template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

template <typename T>
__device__ __forceinline__ float load_float(const T* p) {
  return to_float(*p);
}
template <typename T>
__device__ __forceinline__ void store_float(T* p, float v) {
  *p = from_float<T>(v);
}

// -inf without <cmath>/<math_constants.h> (neither is available under NVRTC).
__device__ __forceinline__ float negative_infinity() { return -__int_as_float(0x7f800000); }

// ---- reductions ----------------------------------------------------------------------------

constexpr int kWarpSize = 32;

// Every lane of a full warp receives the sum of all 32 lanes.
__device__ __forceinline__ float warp_reduce_sum(float v) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_reduce_max(float v) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Block-wide reductions. Requirements: blockDim.x is a multiple of 32 and at most 1024, every
// thread of the block calls the function (it contains __syncthreads). Every thread receives the
// result. The trailing barrier lets the caller invoke it again straight away (the scratch array is
// shared by all calls in the block).
struct ReduceSum {
  __device__ __forceinline__ static float warp(float v) { return warp_reduce_sum(v); }
  __device__ __forceinline__ static float identity() { return 0.0f; }
};
struct ReduceMax {
  __device__ __forceinline__ static float warp(float v) { return warp_reduce_max(v); }
  __device__ __forceinline__ static float identity() { return negative_infinity(); }
};

template <typename Op>
__device__ __forceinline__ float block_reduce(float v) {
  __shared__ float scratch[kWarpSize + 1];
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int num_warps = static_cast<int>(blockDim.x) / kWarpSize;
  v = Op::warp(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < num_warps ? scratch[lane] : Op::identity();
    w = Op::warp(w);
    if (lane == 0) scratch[kWarpSize] = w;
  }
  __syncthreads();
  const float result = scratch[kWarpSize];
  __syncthreads();
  return result;
}

__device__ __forceinline__ float block_reduce_sum(float v) { return block_reduce<ReduceSum>(v); }
__device__ __forceinline__ float block_reduce_max(float v) { return block_reduce<ReduceMax>(v); }

}  // namespace kiln
