// scale: x[i] *= a for i < n. Launch: any 1-D grid and block (grid-stride loop).
#include "convert.cuh"

namespace acme {
template <typename T>
__global__ void scale_kernel(long long n, float a, T* x) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    x[i] = from_float<T>(to_float(x[i]) * a);
}
}  // namespace acme
