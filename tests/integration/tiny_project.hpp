#pragma once
// The tiny kernel project the nvcc integration tests build (build_test.cpp, shard_test.cpp): two
// families, `scale` (f32/f16, sm_80+, including a shared header) and `hop` (sm_90a only): five
// compiles for sm_80,sm_90a. One copy, so the tests build the same tree.
#include <filesystem>
#include <string>

#include "kernel_project.hpp"

namespace kiln::test::tiny {

inline const char* kRegistry = R"({
  "format": 1,
  "types": {"f32": "float", "f16": "__half"},
  "families": [
    {"name": "scale", "sources": ["scale.cu"], "entries": ["kiln::scale_kernel<{dtype}>"],
     "params": [{"name": "dtype", "kind": "type", "values": ["f32", "f16"]}],
     "targets": ["sm_80+"]},
    {"name": "hop", "sources": ["hop.cu"], "entries": ["kiln::hop_kernel"],
     "targets": ["sm_90a"]}
  ]
})";

inline const char* kCommon = R"(#pragma once
#include <cuda_fp16.h>
namespace kiln {
__device__ inline float to_f(float v) { return v; }
__device__ inline float to_f(__half v) { return __half2float(v); }
template <typename T> __device__ inline T from_f(float v);
template <> __device__ inline float from_f<float>(float v) { return v; }
template <> __device__ inline __half from_f<__half>(float v) { return __float2half(v); }
}  // namespace kiln
)";

inline const char* kScale = R"(#include "common.cuh"
namespace kiln {
template <typename T>
__global__ void scale_kernel(T* x, float a, int n) {
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] = from_f<T>(to_f(x[i]) * a);
}
}  // namespace kiln
)";

inline const char* kHop = R"(namespace kiln {
__global__ void hop_kernel(float* x) { x[threadIdx.x] += 1.0f; }
}  // namespace kiln
)";

// Writes the project (registry/kernels.json, kernels/common.cuh, scale.cu, hop.cu) under src.
// The tiny project is not kiln's: it has its own package name and version.
inline const std::string kPackage = "tiny-kernels";
inline const std::string kVersion = "0.3.0";

inline void write_project(const std::filesystem::path& src) {
  write_kernel_project(src, {kPackage,
                             kVersion,
                             kRegistry,
                             "",
                             {{"common.cuh", kCommon}, {"scale.cu", kScale}, {"hop.cu", kHop}}});
}

}  // namespace kiln::test::tiny
