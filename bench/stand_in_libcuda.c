/* A stand-in libcuda.so.1 for the --no-gpu mode of kiln_cold_start (docs/performance.md): a
 * benchmark aid, never a test double and never installed. It lets a fresh process on a machine
 * without a GPU walk the same path as on one (libkiln opens "libcuda.so.1", resolves its entry
 * points, loads an image, launches) so that everything but the driver's own work is measured
 * where the code is written. It accepts every image and launches nothing: a result computed
 * through it means nothing, and kiln_cold_start does not check one in --no-gpu mode.
 *
 * The device is one GPU of compute capability $KILN_STAND_IN_CC (default 90), the driver's CUDA
 * version $KILN_STAND_IN_DRIVER (default 13000, CUDA 13.0). Built only with
 * -DKILN_BUILD_BENCH=ON, into <build>/bench/stand-in/libcuda.so.1; kiln_cold_start puts that
 * folder first on its children's LD_LIBRARY_PATH. */
#include <cuda.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

static int g_init = 0;
static CUcontext g_ctx = 0;
static int g_primary; /* its address is the one context */

static int stand_in_cc(void) {
  const char* v = getenv("KILN_STAND_IN_CC");
  int cc = v ? atoi(v) : 90;
  return cc > 0 ? cc : 90;
}

EXPORT CUresult cuInit(unsigned flags) {
  (void)flags;
  g_init = 1;
  return CUDA_SUCCESS;
}
/* The driver's CUDA version: $KILN_STAND_IN_DRIVER as cuDriverGetVersion spells it (12080 for
 * CUDA 12.8; default 13000), so the commands' choice of toolkits is tested for a 12.x driver. */
EXPORT CUresult cuDriverGetVersion(int* v) {
  const char* e = getenv("KILN_STAND_IN_DRIVER");
  int n = e ? atoi(e) : 13000;
  *v = n > 0 ? n : 13000;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuGetErrorName(CUresult r, const char** s) {
  *s = r == CUDA_SUCCESS ? "CUDA_SUCCESS" : "CUDA_ERROR_STAND_IN";
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetCount(int* n) {
  *n = g_init ? 1 : 0;
  return g_init ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}
EXPORT CUresult cuDeviceGet(CUdevice* d, int ordinal) {
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *d = 0;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice d) {
  (void)d;
  strncpy(name, "kiln stand-in device (no GPU)", (size_t)len);
  if (len > 0) name[len - 1] = 0;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d) {
  (void)d;
  if (a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
    *v = stand_in_cc() / 10;
  else if (a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
    *v = stand_in_cc() % 10;
  else
    *v = 0;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxGetCurrent(CUcontext* c) {
  *c = g_ctx;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxSetCurrent(CUcontext c) {
  g_ctx = c;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxGetDevice(CUdevice* d) {
  *d = 0;
  return g_ctx ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}
EXPORT CUresult cuCtxSynchronize(void) { return CUDA_SUCCESS; }
EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice d) {
  (void)d;
  *c = (CUcontext)&g_primary;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
  (void)d;
  return CUDA_SUCCESS;
}
/* A library is a heap cell; its one kernel and function are its address plus one and two. */
EXPORT CUresult cuLibraryLoadData(CUlibrary* lib, const void* image, CUjit_option* jo, void** jv,
                                  unsigned jn, CUlibraryOption* lo, void** lv, unsigned ln) {
  (void)jo, (void)jv, (void)jn, (void)lo, (void)lv, (void)ln;
  if (!image) return CUDA_ERROR_INVALID_IMAGE;
  *lib = (CUlibrary)malloc(4);
  return *lib ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
EXPORT CUresult cuLibraryUnload(CUlibrary lib) {
  free(lib);
  return CUDA_SUCCESS;
}
EXPORT CUresult cuLibraryGetKernelCount(unsigned* n, CUlibrary lib) {
  (void)lib;
  *n = 1;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuLibraryGetKernel(CUkernel* k, CUlibrary lib, const char* name) {
  (void)name;
  *k = (CUkernel)((char*)lib + 1);
  return CUDA_SUCCESS;
}
EXPORT CUresult cuKernelGetFunction(CUfunction* f, CUkernel k) {
  *f = (CUfunction)((char*)k + 1);
  return CUDA_SUCCESS;
}
EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned shared, CUstream s, void** args,
                               void** extra) {
  (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)s;
  (void)args, (void)extra;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuStreamSynchronize(CUstream s) {
  (void)s;
  return CUDA_SUCCESS;
}
/* NVRTC 13 opens libcuda.so.1 itself when it compiles, and calls cuGetExportTable without
 * checking that it resolved: without one here, `kiln doctor`'s NVRTC test compile crashed. No
 * table is offered; NVRTC compiles without it. */
EXPORT CUresult cuGetExportTable(const void** table, const CUuuid* id) {
  (void)id;
  if (table) *table = NULL;
  return CUDA_ERROR_NOT_SUPPORTED;
}
EXPORT CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus* st) {
  (void)s;
  *st = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t n) {
  void* m = malloc(n);
  *p = (CUdeviceptr)m;
  return m ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void* h, size_t n) {
  memcpy((void*)d, h, n);
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemcpyDtoH_v2(void* h, CUdeviceptr d, size_t n) {
  memcpy(h, (const void*)d, n);
  return CUDA_SUCCESS;
}
