#pragma once
// Typed host functions over the loader, one per kernel family (docs/ops.md). Each one:
//   1. validates its arguments and throws Error{Usage} naming the bad argument, before any
//      get() or launch (null pointers, sizes <= 0 or overflowing, misalignment, workspace);
//   2. picks the specialisation URI from the arguments (choose_uri_*: pure, unit-tested);
//   3. writes the KILN_API_LOG line (level 1: name, 2: arguments) before the launch;
//   4. gets the kernel with Loader::get(uri, stream) (capture-aware) and launches it.
// Pointers are device pointers; `stream` is a CUstream (nullptr = the legacy default stream).
// Nothing here allocates device memory: reduce_sum takes an explicit workspace.
#include <cstddef>
#include <string>
#include <vector>

#include "kiln/export.h"
#include "kiln/loader.hpp"

namespace kiln::ops {

enum class DType { F32, F16, BF16 };

KILN_API const char* to_string(DType dtype);     // "f32", "f16", "bf16" (the registry's spelling)
KILN_API std::size_t element_size(DType dtype);  // 4, 2, 2

// ---- URI choice: pure functions of the arguments (no I/O, no device) ------------------------
KILN_API std::string choose_uri_axpy(DType dtype);
KILN_API std::string choose_uri_reduce_sum(DType dtype);
KILN_API int choose_rmsnorm_block(int cols);  // 128, 256 or 512
KILN_API std::string choose_uri_rmsnorm(DType dtype, int cols);
KILN_API int choose_softmax_block(int cols);  // 128 or 256
KILN_API std::string choose_uri_softmax(DType dtype, int cols);
KILN_API std::string choose_uri_silu_and_mul(DType dtype);
KILN_API std::string choose_uri_gemm_f32(int M, int N, int K);
// The candidates for an f16 GEMM on a device of compute capability cc (90 = 9.0), best first:
// on CC 9.0 the sm_90a wgmma kernel, then the tensor-core kernel; elsewhere only the latter.
// gemm_f16 uses the first one that loads, and logs every fallback with its reason.
KILN_API std::vector<std::string> choose_uris_gemm_f16(int M, int N, int K, int cc);

// ---- Launch geometry (pure), exposed for tests and for callers building graphs by hand ------
struct Launch {
  Loader::Dim3 grid;
  Loader::Dim3 block;
};
KILN_API Launch axpy_launch(long long n);
KILN_API Launch rmsnorm_launch(int rows, int cols);
KILN_API Launch softmax_launch(int rows, int cols);
KILN_API Launch silu_and_mul_launch(long long rows, int d);
KILN_API Launch gemm_launch(const std::string& uri, int M,
                            int N);  // gemm_f32 / gemm_f16_tc / wgmma

// Workspace reduce_sum needs: one float per partial block (1 KiB), 4-byte aligned.
KILN_API std::size_t reduce_sum_workspace_bytes();

// ---- The operations ------------------------------------------------------------------------
// y = alpha * x + y over n elements; x == y is allowed, partial overlap is not.
KILN_API void axpy(Loader& loader, void* stream, void* y, const void* x, long long n, float alpha,
                   DType dtype);
// out[0] = sum of in[0..n) (accumulated in float, rounded once to dtype). Two launches.
KILN_API void reduce_sum(Loader& loader, void* stream, void* out, const void* in, long long n,
                         void* workspace, std::size_t workspace_bytes, DType dtype);
// Row-wise RMS norm of in[rows, cols] with weight[cols]; out may equal in.
KILN_API void rmsnorm(Loader& loader, void* stream, void* out, const void* in, const void* weight,
                      int rows, int cols, float eps, DType dtype);
// Row-wise softmax of in[rows, cols]; out may equal in.
KILN_API void softmax(Loader& loader, void* stream, void* out, const void* in, int rows, int cols,
                      DType dtype);
// in[rows, 2d] -> out[rows, d] = silu(gate) * up; dtype f16 or bf16; out must not overlap in.
KILN_API void silu_and_mul(Loader& loader, void* stream, void* out, const void* in, long long rows,
                           int d, DType dtype);
// C[M, N] = A[M, K] B[K, N], row-major float; C must not overlap A or B.
KILN_API void gemm_f32(Loader& loader, void* stream, float* C, const float* A, const float* B,
                       int M, int N, int K);
// C[M, N] (float) = A[M, K] B[K, N] with A, B row-major f16 (as raw 16-bit storage).
// Returns the URI it launched (wgmma on CC 9.0 when its artifact loads, else tensor cores).
KILN_API std::string gemm_f16(Loader& loader, void* stream, float* C, const void* A, const void* B,
                              int M, int N, int K);

}  // namespace kiln::ops
