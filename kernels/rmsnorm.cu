// rmsnorm: out[r, c] = in[r, c] * weight[c] / sqrt(mean_c(in[r, :]^2) + eps), in float.
//
// Launch: blockDim.x == BLOCK exactly (BLOCK is a multiple of 32, <= 1024); grid = rows blocks
// (one block per row; a smaller grid also works, blocks stride over rows). No dynamic shared
// memory, no alignment requirement beyond the element type. out may equal in (in place).
#include "common.cuh"

namespace kiln {

template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
    rmsnorm_kernel(T* out, const T* in, const T* weight, int rows, int cols, float eps) {
  static_assert(BLOCK % kWarpSize == 0 && BLOCK <= 1024, "BLOCK must be a multiple of 32");
  for (int row = static_cast<int>(blockIdx.x); row < rows; row += static_cast<int>(gridDim.x)) {
    const T* x = in + static_cast<long long>(row) * cols;
    T* y = out + static_cast<long long>(row) * cols;
    float sum_sq = 0.0f;
    for (int c = static_cast<int>(threadIdx.x); c < cols; c += BLOCK) {
      const float v = load_float(x + c);
      sum_sq += v * v;
    }
    sum_sq = block_reduce_sum(sum_sq);
    const float inv_rms = rsqrtf(sum_sq / static_cast<float>(cols) + eps);
    for (int c = static_cast<int>(threadIdx.x); c < cols; c += BLOCK)
      store_float(y + c, load_float(x + c) * inv_rms * load_float(weight + c));
  }
}

}  // namespace kiln
