// The C ABI of the typed kernel API (kiln/kiln_ops.h): exceptions never cross it; each becomes
// a status (= CLI exit code) and a thread-local message.
#include "kiln/kiln_ops.h"

#include <memory>
#include <new>
#include <string>

#include "c_api_internal.hpp"
#include "kiln/error.hpp"
#include "kiln/loader.hpp"
#include "kiln/ops.hpp"

namespace {

using kiln::c_api::fail;

template <typename F>
kiln_status guarded(const char* fn, kiln_loader* loader, F&& f) {
  if (!loader || !loader->loader)
    return fail(KILN_ERROR_USAGE, std::string(fn) + ": loader is NULL");
  try {
    f(*loader->loader);
    return KILN_OK;
  } catch (const kiln::Error& e) {
    return fail(e);
  } catch (const std::bad_alloc&) {
    return fail(KILN_ERROR_INTERNAL, std::string(fn) + ": out of memory");
  } catch (const std::exception& e) {
    return fail(KILN_ERROR_INTERNAL, std::string(fn) + ": internal error: " + e.what());
  }
}

// An out-of-range enum value maps to an invalid DType, which the C++ checks reject by name.
kiln::ops::DType to_dtype(kiln_dtype d) { return static_cast<kiln::ops::DType>(d); }

}  // namespace

extern "C" {

kiln_status kiln_op_axpy(kiln_loader* loader, void* stream, void* y, const void* x, long long n,
                         float alpha, kiln_dtype dtype) {
  return guarded("kiln_op_axpy", loader, [&](kiln::Loader& l) {
    kiln::ops::axpy(l, stream, y, x, n, alpha, to_dtype(dtype));
  });
}

size_t kiln_op_reduce_sum_workspace_bytes(void) { return kiln::ops::reduce_sum_workspace_bytes(); }

kiln_status kiln_op_reduce_sum(kiln_loader* loader, void* stream, void* out, const void* in,
                               long long n, void* workspace, size_t workspace_bytes,
                               kiln_dtype dtype) {
  return guarded("kiln_op_reduce_sum", loader, [&](kiln::Loader& l) {
    kiln::ops::reduce_sum(l, stream, out, in, n, workspace, workspace_bytes, to_dtype(dtype));
  });
}

kiln_status kiln_op_rmsnorm(kiln_loader* loader, void* stream, void* out, const void* in,
                            const void* weight, int rows, int cols, float eps, kiln_dtype dtype) {
  return guarded("kiln_op_rmsnorm", loader, [&](kiln::Loader& l) {
    kiln::ops::rmsnorm(l, stream, out, in, weight, rows, cols, eps, to_dtype(dtype));
  });
}

kiln_status kiln_op_softmax(kiln_loader* loader, void* stream, void* out, const void* in, int rows,
                            int cols, kiln_dtype dtype) {
  return guarded("kiln_op_softmax", loader, [&](kiln::Loader& l) {
    kiln::ops::softmax(l, stream, out, in, rows, cols, to_dtype(dtype));
  });
}

kiln_status kiln_op_silu_and_mul(kiln_loader* loader, void* stream, void* out, const void* in,
                                 long long rows, int d, kiln_dtype dtype) {
  return guarded("kiln_op_silu_and_mul", loader, [&](kiln::Loader& l) {
    kiln::ops::silu_and_mul(l, stream, out, in, rows, d, to_dtype(dtype));
  });
}

kiln_status kiln_op_gemm_f32(kiln_loader* loader, void* stream, float* C, const float* A,
                             const float* B, int M, int N, int K) {
  return guarded("kiln_op_gemm_f32", loader,
                 [&](kiln::Loader& l) { kiln::ops::gemm_f32(l, stream, C, A, B, M, N, K); });
}

kiln_status kiln_op_gemm_f16(kiln_loader* loader, void* stream, float* C, const void* A,
                             const void* B, int M, int N, int K) {
  return guarded("kiln_op_gemm_f16", loader,
                 [&](kiln::Loader& l) { kiln::ops::gemm_f16(l, stream, C, A, B, M, N, K); });
}

// Kept for callers of the first API; the ops report into the same slot as kiln_last_error().
const char* kiln_ops_last_error(void) { return kiln_last_error(); }

}  // extern "C"
