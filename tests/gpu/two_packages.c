/* Two packages in one C process, each from its own plain mirror under its own index pin
 * (kiln_config.index_sha256; issue 24, item 4), as a C program on a node does it: kiln-kernels'
 * axpy_dtype_f32 and acme-kernels' scale_dtype_f32, each launched on the GPU and its result
 * checked. No KILN_* variable is read for the pins: both loaders would otherwise share one.
 *
 *   two_packages KILN_MIRROR KILN_PIN ACME_MIRROR ACME_PIN CACHE_DIR
 *
 * Built by scripts/gpu_release_check.sh prepare against the unpacked tarball and acme's install
 * tree; run by its `run` step on an empty node (no store beside either library). Exit 0 when
 * both results are right, 1 otherwise, with kiln_last_error() on stderr. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acme/kernels.h"
#include "kiln/kernels.h"
#include "kiln/kiln.h"

#define N 4096

static int fail_kiln(const char* what, kiln_status s) {
  fprintf(stderr, "FAILED: %s: %s: %s\n", what, kiln_status_name(s), kiln_last_error());
  return 1;
}

static int fail_cuda(const char* what, CUresult r) {
  const char* name = NULL;
  cuGetErrorName(r, &name);
  fprintf(stderr, "FAILED: %s: %s\n", what, name ? name : "CUDA error");
  return 1;
}

/* A loader of `package` whose one source is `mirror`, pinned by `pin`; its cache of its own. */
static int make_loader(const kiln_package* package, const char* mirror, const char* pin,
                       const char* cache, kiln_loader** out) {
  kiln_config cfg;
  kiln_config_init(&cfg);
  cfg.artifact_path = "";
  cfg.cache_dir = cache;
  cfg.mirrors = mirror;
  cfg.disable_jit = 1;
  cfg.index_sha256 = pin;
  kiln_status s = kiln_loader_create(package, &cfg, out);
  return s == KILN_OK ? 0 : fail_kiln("kiln_loader_create", s);
}

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: two_packages KILN_MIRROR KILN_PIN ACME_MIRROR ACME_PIN CACHE_DIR\n");
    return 2;
  }
  char kiln_cache[4096], acme_cache[4096];
  snprintf(kiln_cache, sizeof kiln_cache, "%s/kiln-kernels", argv[5]);
  snprintf(acme_cache, sizeof acme_cache, "%s/acme-kernels", argv[5]);

  CUresult r;
  CUdevice dev;
  CUcontext ctx;
  if ((r = cuInit(0)) != CUDA_SUCCESS) return fail_cuda("cuInit", r);
  if ((r = cuDeviceGet(&dev, 0)) != CUDA_SUCCESS) return fail_cuda("cuDeviceGet", r);
  if ((r = cuDevicePrimaryCtxRetain(&ctx, dev)) != CUDA_SUCCESS) return fail_cuda("ctx", r);
  if ((r = cuCtxSetCurrent(ctx)) != CUDA_SUCCESS) return fail_cuda("cuCtxSetCurrent", r);

  kiln_loader *kl = NULL, *al = NULL;
  if (make_loader(kiln_kernels_package(), argv[1], argv[2], kiln_cache, &kl)) return 1;
  if (make_loader(acme_kernels_package(), argv[3], argv[4], acme_cache, &al)) return 1;
  kiln_kernel *axpy = NULL, *scale = NULL;
  kiln_status s;
  if ((s = kiln_get(kl, "axpy_dtype_f32", &axpy)) != KILN_OK) return fail_kiln("get axpy", s);
  if ((s = kiln_get(al, "scale_dtype_f32", &scale)) != KILN_OK) return fail_kiln("get scale", s);

  static float x[N], y[N], out[N];
  for (int i = 0; i < N; ++i) {
    x[i] = (float)(i % 97);
    y[i] = (float)(i % 13);
  }
  CUdeviceptr dx, dy;
  if ((r = cuMemAlloc(&dx, sizeof x)) != CUDA_SUCCESS) return fail_cuda("cuMemAlloc", r);
  if ((r = cuMemAlloc(&dy, sizeof y)) != CUDA_SUCCESS) return fail_cuda("cuMemAlloc", r);
  cuMemcpyHtoD(dx, x, sizeof x);
  cuMemcpyHtoD(dy, y, sizeof y);
  long long n = N;
  float alpha = 2.0f, a = 3.0f;
  const unsigned grid[3] = {(N + 255) / 256, 1, 1}, block[3] = {256, 1, 1};
  void* axpy_args[] = {&n, &alpha, &dx, &dy}; /* y = 2 x + y */
  if ((s = kiln_launch(kl, axpy, 0, grid, block, 0, NULL, axpy_args)) != KILN_OK)
    return fail_kiln("launch axpy", s);
  void* scale_args[] = {&n, &a, &dy}; /* y *= 3 */
  if ((s = kiln_launch(al, scale, 0, grid, block, 0, NULL, scale_args)) != KILN_OK)
    return fail_kiln("launch scale", s);
  if ((r = cuCtxSynchronize()) != CUDA_SUCCESS) return fail_cuda("cuCtxSynchronize", r);
  cuMemcpyDtoH(out, dy, sizeof out);
  int wrong = 0;
  for (int i = 0; i < N; ++i) {
    float want = 3.0f * (2.0f * x[i] + y[i]);
    if (out[i] != want) {
      if (wrong++ < 3) fprintf(stderr, "FAILED: y[%d] = %g, want %g\n", i, out[i], want);
    }
  }
  cuMemFree(dx);
  cuMemFree(dy);
  kiln_loader_destroy(al);
  kiln_loader_destroy(kl);
  if (wrong) return 1;
  printf(
      "two packages in one process: axpy_dtype_f32 (kiln-kernels, %s) then scale_dtype_f32 "
      "(acme-kernels, %s), %d results right\n",
      argv[1], argv[3], N);
  return 0;
}
