// reduce_sum: out[0] = sum of x[0..n), in two launches and without any allocation, so that it is
// safe under CUDA Graph capture and deterministic for a fixed grid.
//
//   1. reduce_sum_partial<T>(n, x, workspace): grid-stride; block b writes its partial sum to
//      workspace[b]. Launch with KILN_REDUCE_BLOCKS blocks x KILN_REDUCE_THREADS threads
//      (any grid works; blockDim.x must be a multiple of 32, at most 1024).
//   2. reduce_sum_final<T>(num_partials, workspace, out): exactly one block (blockDim.x a
//      multiple of 32, at most 1024; KILN_REDUCE_THREADS recommended), num_partials = the grid
//      size of step 1. Writes out[0], rounded once to T.
//
// Workspace: caller-provided, at least num_partials (= gridDim.x of step 1) floats, i.e.
// KILN_REDUCE_BLOCKS * sizeof(float) = 1 KiB with the recommended launch; 4-byte aligned.
// Accumulation is in float; the result for the same n, data and grid is bit-identical run to run.
#include "common.cuh"

#define KILN_REDUCE_BLOCKS 256
#define KILN_REDUCE_THREADS 256

namespace kiln {

template <typename T>
__global__ void reduce_sum_partial(long long n, const T* x, float* workspace) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  float acc = 0.0f;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    acc += load_float(x + i);
  acc = block_reduce_sum(acc);
  // Every block writes its slot, even a block that saw no element, so stale workspace contents
  // never leak into the result.
  if (threadIdx.x == 0) workspace[blockIdx.x] = acc;
}

template <typename T>
__global__ void reduce_sum_final(int num_partials, const float* workspace, T* out) {
  float acc = 0.0f;
  for (int i = static_cast<int>(threadIdx.x); i < num_partials; i += static_cast<int>(blockDim.x))
    acc += workspace[i];
  acc = block_reduce_sum(acc);
  if (threadIdx.x == 0) store_float(out, acc);
}

}  // namespace kiln
