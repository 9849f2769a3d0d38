// axpy: y = alpha * x + y, element-wise over n elements.
//
// Launch: any 1-D grid and any blockDim.x (the loop is grid-stride), e.g. 256 threads and
// min(ceil(n / 256), 65535) blocks. No shared memory, no alignment requirement. x and y must not
// overlap partially (x == y is fine).
#include "common.cuh"

namespace kiln {

template <typename T>
__global__ void axpy_kernel(long long n, float alpha, const T* x, T* y) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    store_float(y + i, alpha * load_float(x + i) + load_float(y + i));
}

}  // namespace kiln
