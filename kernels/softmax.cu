// softmax: row-wise, numerically stable: out[r, c] = exp(in[r, c] - m) / sum_c exp(in[r, c] - m)
// with m the row maximum; computed in float. A row that is entirely -inf yields NaN (as PyTorch).
//
// Launch: blockDim.x == BLOCK exactly (multiple of 32); grid = rows blocks (one block per row; a
// smaller grid also works, blocks stride over rows). No dynamic shared memory. out may equal in.
#include "common.cuh"

namespace kiln {

template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK) softmax_kernel(T* out, const T* in, int rows, int cols) {
  static_assert(BLOCK % kWarpSize == 0 && BLOCK <= 1024, "BLOCK must be a multiple of 32");
  for (int row = static_cast<int>(blockIdx.x); row < rows; row += static_cast<int>(gridDim.x)) {
    const T* x = in + static_cast<long long>(row) * cols;
    T* y = out + static_cast<long long>(row) * cols;
    float row_max = negative_infinity();
    for (int c = static_cast<int>(threadIdx.x); c < cols; c += BLOCK)
      row_max = fmaxf(row_max, load_float(x + c));
    row_max = block_reduce_max(row_max);
    float sum = 0.0f;
    for (int c = static_cast<int>(threadIdx.x); c < cols; c += BLOCK)
      sum += expf(load_float(x + c) - row_max);
    sum = block_reduce_sum(sum);
    const float inv_sum = 1.0f / sum;
    for (int c = static_cast<int>(threadIdx.x); c < cols; c += BLOCK)
      store_float(y + c, expf(load_float(x + c) - row_max) * inv_sum);
  }
}

}  // namespace kiln
