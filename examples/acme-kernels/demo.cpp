// Two kernel packages in one process: acme-kernels (this project: scale and shift) and kiln's
// reference package (kiln::ops::axpy), each served by its own Loader from its own store, each
// result checked on the host.
//
//   acme_demo [--require-gpu]
// Without a GPU it says so and only resolves (where each kernel would come from for sm_90);
// exit 0, or 1 with --require-gpu. Any wrong result, or kernel not found, is exit 1.
#include <cuda_runtime.h>

#include <acme/kernels.h>
#include <kiln/error.hpp>
#include <kiln/kernels.h>
#include <kiln/loader.hpp>
#include <kiln/ops.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

bool cuda_ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "acme_demo: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

void launch(kiln::Loader& loader, const std::string& uri, long long n, float v, float* x) {
  const kiln::KernelHandle& k = loader.get(uri);
  void* args[] = {&n, &v, &x};
  loader.launch(k, 0, {static_cast<unsigned>((n + 255) / 256), 1, 1}, {256, 1, 1}, 0, nullptr,
                args);
  std::printf("%s %s: %s from %s\n", loader.package().name, loader.package().version, uri.c_str(),
              k.origin.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const bool require_gpu = argc > 1 && std::strcmp(argv[1], "--require-gpu") == 0;
  try {
    kiln::Loader acme(*acme_kernels_package());
    kiln::Loader reference(*kiln_kernels_package());
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      std::printf("no GPU: launches skipped%s\n", require_gpu ? " (--require-gpu: failing)" : "");
      for (const char* uri : {"scale_dtype_f32", "shift_dtype_f32"}) {
        kiln::Resolution r = acme.resolve(uri, 90);
        std::printf("acme-kernels %s on sm_90: %s\n", uri,
                    r.chosen ? (r.chosen->tier + " " + r.chosen->path).c_str() : "no source");
      }
      return require_gpu ? 1 : 0;
    }
    if (!cuda_ok(cudaFree(nullptr), "cudaFree(0)")) return 1;  // the primary context, current
    const long long n = 1 << 20;
    std::vector<float> x(n), y(n);
    for (long long i = 0; i < n; ++i) {
      x[i] = static_cast<float>(i % 97) - 48.0f;
      y[i] = static_cast<float>(i % 13);
    }
    float *dx = nullptr, *dy = nullptr;
    if (!cuda_ok(cudaMalloc(&dx, n * sizeof(float)), "cudaMalloc") ||
        !cuda_ok(cudaMalloc(&dy, n * sizeof(float)), "cudaMalloc") ||
        !cuda_ok(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice), "copy") ||
        !cuda_ok(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice), "copy"))
      return 1;
    launch(acme, "scale_dtype_f32", n, 3.0f, dx);  // x = 3x
    launch(acme, "shift_dtype_f32", n, 1.5f, dx);  // x = 3x + 1.5
    kiln::ops::axpy(reference, nullptr, dy, dx, n, 2.0f, kiln::ops::DType::F32);  // y += 2x
    std::printf("%s %s: axpy_dtype_f32 through kiln::ops\n", reference.package().name,
                reference.package().version);
    std::vector<float> gx(n), gy(n);
    if (!cuda_ok(cudaMemcpy(gx.data(), dx, n * sizeof(float), cudaMemcpyDeviceToHost), "copy") ||
        !cuda_ok(cudaMemcpy(gy.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost), "copy"))
      return 1;
    long long bad = 0;
    for (long long i = 0; i < n; ++i) {
      float wx = x[i] * 3.0f + 1.5f, wy = y[i] + 2.0f * wx;
      if (std::fabs(gx[i] - wx) > 1e-5f * (1 + std::fabs(wx)) ||
          std::fabs(gy[i] - wy) > 1e-5f * (1 + std::fabs(wy)))
        ++bad;
    }
    cudaFree(dx);
    cudaFree(dy);
    if (bad) {
      std::fprintf(stderr, "acme_demo: %lld of %lld results wrong\n", bad, n);
      return 1;
    }
    std::printf("checked %lld results of acme-kernels (scale, shift) and kiln-kernels (axpy): "
                "all correct\n",
                n);
    return 0;
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "acme_demo: error (%s): %s\n", kiln::to_string(e.kind()), e.what());
    return 1;
  }
}
