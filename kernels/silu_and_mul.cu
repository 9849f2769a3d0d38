// silu_and_mul (SwiGLU gate): in is [rows, 2*d], out is [rows, d],
// out[r, i] = silu(in[r, i]) * in[r, d + i], silu(x) = x / (1 + exp(-x)); computed in float and
// rounded once to T.
//
// Launch: grid = rows blocks (one block per row; a smaller grid also works, blocks stride over
// rows), any blockDim.x, e.g. min(d, 1024) rounded up to a multiple of 32. No shared memory, no
// alignment requirement. out must not overlap in.
#include "common.cuh"

namespace kiln {

template <typename T>
__global__ void silu_and_mul_kernel(T* out, const T* in, long long rows, int d) {
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* gate = in + row * 2 * d;
    const T* up = gate + d;
    T* y = out + row * d;
    for (int i = static_cast<int>(threadIdx.x); i < d; i += static_cast<int>(blockDim.x)) {
      const float g = load_float(gate + i);
      store_float(y + i, g / (1.0f + expf(-g)) * load_float(up + i));
    }
  }
}

}  // namespace kiln
