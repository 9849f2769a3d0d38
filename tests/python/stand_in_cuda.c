/* A stand-in libcuda.so.1 for the Python tests on machines without a GPU (tests/python/
 * conftest.py builds it and puts its directory first on LD_LIBRARY_PATH of a child
 * interpreter). It implements the 19 driver calls libkiln makes (core/runtime/driver.cpp), and
 * cuGetExportTable for NVRTC, for
 * one device of compute capability $KILN_STAND_IN_CC (default 90) and runs nothing: a loaded
 * image "holds" every kernel asked for, and each cuLaunchKernel appends one line to
 * $KILN_STAND_IN_LOG:
 *   launch <symbol> grid X,Y,Z block X,Y,Z shared N stream 0xS params <hex of 8 bytes>...
 * ($KILN_STAND_IN_PARAMS slots, default 0), so a test sees exactly what Python handed the
 * driver. $KILN_STAND_IN_LAUNCH_ERROR=<CUresult> makes every launch fail with that code; the
 * kiln loader, its verification and its tiers are the real ones. The H200 proof is
 * tests/gpu/python_ops_check.py. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
static int context_token;
static __thread void* current;

static int env_int(const char* name, int fallback) {
  const char* v = getenv(name);
  return v && *v ? atoi(v) : fallback;
}

/* $KILN_STAND_IN_INIT_LOG: each cuInit appends a line "cuInit" (when a test wants to see
 * whether anything started the driver). */
CUresult cuInit(unsigned flags) {
  (void)flags;
  const char* path = getenv("KILN_STAND_IN_INIT_LOG");
  FILE* f = path && *path ? fopen(path, "a") : NULL;
  if (f) {
    fputs("cuInit\n", f);
    fclose(f);
  }
  return 0;
}
/* NVRTC asks a loaded libcuda.so.1 for its private tables; "none" sends it down its
 * driverless path, as on a machine without a driver (a missing symbol makes it crash). */
CUresult cuGetExportTable(const void** table, const void* id) {
  (void)id;
  *table = NULL;
  return 500; /* CUDA_ERROR_NOT_FOUND */
}
CUresult cuDriverGetVersion(int* v) { *v = 13000; return 0; }
CUresult cuGetErrorName(CUresult e, const char** s) {
  *s = e == 1 ? "CUDA_ERROR_INVALID_VALUE" : e == 700 ? "CUDA_ERROR_ILLEGAL_ADDRESS"
                                                      : "CUDA_ERROR_UNKNOWN";
  return 0;
}
CUresult cuDeviceGetCount(int* n) { *n = 1; return 0; }
CUresult cuDeviceGet(int* d, int ordinal) { *d = ordinal; return ordinal == 0 ? 0 : 101; }
CUresult cuDeviceGetName(char* name, int len, int d) {
  (void)d;
  snprintf(name, (size_t)len, "kiln stand-in CC %d.%d", env_int("KILN_STAND_IN_CC", 90) / 10,
           env_int("KILN_STAND_IN_CC", 90) % 10);
  return 0;
}
CUresult cuDeviceGetAttribute(int* v, int attribute, int d) {
  (void)d;
  int cc = env_int("KILN_STAND_IN_CC", 90);
  if (attribute == 75) *v = cc / 10;      /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */
  else if (attribute == 76) *v = cc % 10; /* ..._MINOR */
  else *v = 0;
  return 0;
}
CUresult cuCtxGetCurrent(void** c) { *c = current; return 0; }
CUresult cuCtxSetCurrent(void* c) { current = c; return 0; }
CUresult cuCtxGetDevice(int* d) { *d = 0; return 0; }
CUresult cuDevicePrimaryCtxRetain(void** c, int d) { (void)d; *c = &context_token; return 0; }
CUresult cuDevicePrimaryCtxRelease_v2(int d) { (void)d; return 0; }
CUresult cuLibraryLoadData(void** lib, const void* image, void* o, void** ov, unsigned n,
                           void* lo, void** lov, unsigned ln) {
  (void)image; (void)o; (void)ov; (void)n; (void)lo; (void)lov; (void)ln;
  *lib = malloc(1);
  return 0;
}
CUresult cuLibraryUnload(void* lib) { free(lib); return 0; }
CUresult cuLibraryGetKernelCount(unsigned* n, void* lib) { (void)lib; *n = 1; return 0; }
CUresult cuLibraryGetKernel(void** k, void* lib, const char* name) {
  (void)lib;
  *k = strdup(name); /* the "kernel" is its name, so launches can say what ran */
  return 0;
}
CUresult cuKernelGetFunction(void** f, void* k) { *f = k; return 0; }
CUresult cuStreamIsCapturing(void* s, int* status) { (void)s; *status = 0; return 0; }
CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shared, void* stream, void** params, void** extra) {
  (void)extra;
  int fail = env_int("KILN_STAND_IN_LAUNCH_ERROR", 0);
  if (fail) return fail;
  const char* path = getenv("KILN_STAND_IN_LOG");
  if (!path) return 0;
  FILE* log = fopen(path, "a");
  if (!log) return 999;
  fprintf(log, "launch %s grid %u,%u,%u block %u,%u,%u shared %u stream 0x%llx params",
          (const char*)f, gx, gy, gz, bx, by, bz, shared,
          (unsigned long long)(uintptr_t)stream);
  int count = env_int("KILN_STAND_IN_PARAMS", 0);
  for (int i = 0; i < count; ++i) {
    fputc(' ', log);
    const unsigned char* b = params[i];
    for (int k = 0; k < 8; ++k) fprintf(log, "%02x", b[k]);
  }
  fputc('\n', log);
  fclose(log);
  return 0;
}
