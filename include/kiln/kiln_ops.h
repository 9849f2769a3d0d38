/* kiln typed kernel API, C ABI: the functions of kiln/ops.hpp for C and language bindings.
 * Each returns a kiln_status (values = CLI exit codes, see kiln.h); bad arguments are
 * KILN_ERROR_USAGE and are reported before anything is loaded or launched. The message of the
 * calling thread's last failure is kiln_last_error() (kiln_ops_last_error() is the same). Pointers
 * are device pointers; `stream` is a CUstream (NULL = the legacy default stream). */
#ifndef KILN_KILN_OPS_H
#define KILN_KILN_OPS_H

#include <stddef.h>

#include "kiln/export.h"

#include "kiln/kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

/* KILN_DTYPE_MAX_ENUM keeps the enum int-sized so any int a C caller passes is a valid value
   that kiln can reject with KILN_ERROR_USAGE. */
typedef enum kiln_dtype {
  KILN_DTYPE_F32 = 0,
  KILN_DTYPE_F16 = 1,
  KILN_DTYPE_BF16 = 2,
  KILN_DTYPE_MAX_ENUM = 0x7fffffff
} kiln_dtype;

/* y = alpha * x + y over n elements (x == y allowed, partial overlap not). */
KILN_API kiln_status kiln_op_axpy(kiln_loader* loader, void* stream, void* y, const void* x,
                                  long long n, float alpha, kiln_dtype dtype);
/* Bytes of workspace kiln_op_reduce_sum needs (one float per partial block). */
KILN_API size_t kiln_op_reduce_sum_workspace_bytes(void);
/* out[0] = sum of in[0..n); workspace: >= kiln_op_reduce_sum_workspace_bytes(), 4-byte aligned. */
KILN_API kiln_status kiln_op_reduce_sum(kiln_loader* loader, void* stream, void* out,
                                        const void* in, long long n, void* workspace,
                                        size_t workspace_bytes, kiln_dtype dtype);
/* Row-wise RMS norm of in[rows, cols] with weight[cols]; out may equal in. */
KILN_API kiln_status kiln_op_rmsnorm(kiln_loader* loader, void* stream, void* out, const void* in,
                                     const void* weight, int rows, int cols, float eps,
                                     kiln_dtype dtype);
/* Row-wise softmax of in[rows, cols]; out may equal in. */
KILN_API kiln_status kiln_op_softmax(kiln_loader* loader, void* stream, void* out, const void* in,
                                     int rows, int cols, kiln_dtype dtype);
/* in[rows, 2d] -> out[rows, d]; dtype f16 or bf16; out must not overlap in. */
KILN_API kiln_status kiln_op_silu_and_mul(kiln_loader* loader, void* stream, void* out,
                                          const void* in, long long rows, int d, kiln_dtype dtype);
/* C[M, N] = A[M, K] B[K, N], row-major float. */
KILN_API kiln_status kiln_op_gemm_f32(kiln_loader* loader, void* stream, float* C, const float* A,
                                      const float* B, int M, int N, int K);
/* C[M, N] (float) = A[M, K] B[K, N], A and B row-major f16. */
KILN_API kiln_status kiln_op_gemm_f16(kiln_loader* loader, void* stream, float* C, const void* A,
                                      const void* B, int M, int N, int K);

/* The message of the calling thread's last failing kiln_op_* call ("" if none). */
KILN_API const char* kiln_ops_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* KILN_KILN_OPS_H */
