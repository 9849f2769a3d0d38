/* A stand-in libcuda.so.1 for the Python tests on machines without a GPU (tests/python/
 * conftest.py builds it and puts its directory first on LD_LIBRARY_PATH of a child
 * interpreter). It implements the driver calls libkiln makes (core/runtime/driver.cpp), and
 * cuGetExportTable for NVRTC, for $KILN_STAND_IN_DEVICES devices (default 1, at most 8) of
 * compute capability $KILN_STAND_IN_CC (default 90), each with its primary context, and runs
 * nothing: a loaded image "holds" every kernel asked for.
 * cuKernelGetParamInfo answers from a parameter list per kernel: $KILN_STAND_IN_PARAM_SIZES
 * ("8,4,8,8": every kernel's) when set, else the list below for the kernels the tests launch
 * (by a part of the symbol); for any other kernel, or with $KILN_STAND_IN_NO_PARAM_INFO=1, it
 * answers CUDA_ERROR_NOT_SUPPORTED, as a driver that cannot say. Each cuLaunchKernel appends
 * one line to $KILN_STAND_IN_LOG:
 *   launch <symbol> grid X,Y,Z block X,Y,Z shared N ctx D stream 0xS params <hex>...
 * (D: the device of the current context), each parameter at its size from that list; without a
 * list, $KILN_STAND_IN_PARAMS slots (default 0) of 8 bytes. cuStreamSynchronize appends
 * "synchronize 0xS". $KILN_STAND_IN_LAUNCH_ERROR=<CUresult> makes every launch fail with that
 * code; the kiln loader, its verification and its tiers are the real ones. The H200 proof is
 * tests/gpu/python_ops_check.py. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
static int context_tokens[8]; /* device d's primary context is &context_tokens[d] */
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
/* $KILN_STAND_IN_DRIVER: the driver's CUDA version as cuDriverGetVersion spells it (default
 * 13000, CUDA 13.0). */
CUresult cuDriverGetVersion(int* v) { *v = env_int("KILN_STAND_IN_DRIVER", 13000); return 0; }
CUresult cuGetErrorName(CUresult e, const char** s) {
  *s = e == 1 ? "CUDA_ERROR_INVALID_VALUE" : e == 700 ? "CUDA_ERROR_ILLEGAL_ADDRESS"
                                                      : "CUDA_ERROR_UNKNOWN";
  return 0;
}
static int devices(void) {
  int n = env_int("KILN_STAND_IN_DEVICES", 1);
  return n < 1 ? 1 : n > 8 ? 8 : n;
}
CUresult cuDeviceGetCount(int* n) { *n = devices(); return 0; }
CUresult cuDeviceGet(int* d, int ordinal) {
  *d = ordinal;
  return ordinal >= 0 && ordinal < devices() ? 0 : 101; /* CUDA_ERROR_INVALID_DEVICE */
}
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
static int current_device(void) {
  return current ? (int)((int*)current - context_tokens) : 0;
}
CUresult cuCtxGetDevice(int* d) {
  if (!current) return 201; /* CUDA_ERROR_INVALID_CONTEXT */
  *d = current_device();
  return 0;
}
CUresult cuDevicePrimaryCtxRetain(void** c, int d) {
  if (d < 0 || d >= devices()) return 101;
  *c = &context_tokens[d];
  return 0;
}
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

static void log_line(const char* fmt, unsigned long long value) {
  const char* path = getenv("KILN_STAND_IN_LOG");
  if (!path) return;
  FILE* log = fopen(path, "a");
  if (!log) return;
  fprintf(log, fmt, value);
  fclose(log);
}
CUresult cuStreamSynchronize(void* s) {
  log_line("synchronize 0x%llx\n", (unsigned long long)(uintptr_t)s);
  return 0;
}

/* The parameter sizes of `symbol` into sizes[]; their count, or -1 when unknown. */
static int param_sizes(const char* symbol, size_t* sizes) {
  static const struct { const char* part; const char* sizes; } known[] = {
      {"scale_kernel", "8,8,4,4"}, /* pyt::scale_kernel<T>(T* y, const T* x, T a, int n) */
      {"axpy_kernel", "8,4,8,8"},  /* kiln::axpy_kernel<T>(long long n, float a, x, y) */
  };
  const char* list = getenv("KILN_STAND_IN_PARAM_SIZES");
  if (env_int("KILN_STAND_IN_NO_PARAM_INFO", 0)) return -1;
  for (size_t i = 0; !(list && *list) && i < sizeof known / sizeof known[0]; ++i)
    if (strstr(symbol, known[i].part)) list = known[i].sizes;
  if (!list || !*list) return -1;
  int n = 0;
  for (const char* p = list; *p && n < 64;) {
    sizes[n++] = strtoul(p, (char**)&p, 10);
    if (*p == ',') ++p;
  }
  return n;
}
CUresult cuKernelGetParamInfo(void* kernel, size_t index, size_t* offset, size_t* size) {
  size_t sizes[64];
  int n = param_sizes((const char*)kernel, sizes);
  if (n < 0) return 801; /* CUDA_ERROR_NOT_SUPPORTED */
  if (index >= (size_t)n) return 1; /* CUDA_ERROR_INVALID_VALUE: past the last */
  size_t at = 0;
  for (size_t i = 0; i <= index; ++i) {
    at = (at + sizes[i] - 1) / sizes[i] * sizes[i];
    if (i < index) at += sizes[i];
  }
  *offset = at;
  *size = sizes[index];
  return 0;
}
CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shared, void* stream, void** params, void** extra) {
  (void)extra;
  int fail = env_int("KILN_STAND_IN_LAUNCH_ERROR", 0);
  if (fail) return fail;
  const char* path = getenv("KILN_STAND_IN_LOG");
  if (!path) return 0;
  FILE* log = fopen(path, "a");
  if (!log) return 999;
  fprintf(log, "launch %s grid %u,%u,%u block %u,%u,%u shared %u ctx %d stream 0x%llx params",
          (const char*)f, gx, gy, gz, bx, by, bz, shared, current_device(),
          (unsigned long long)(uintptr_t)stream);
  size_t sizes[64];
  int count = param_sizes((const char*)f, sizes);
  int known = count >= 0;
  if (!known) count = env_int("KILN_STAND_IN_PARAMS", 0);
  for (int i = 0; i < count; ++i) {
    fputc(' ', log);
    const unsigned char* b = params[i];
    for (size_t k = 0; k < (known ? sizes[i] : 8); ++k) fprintf(log, "%02x", b[k]);
  }
  fputc('\n', log);
  fclose(log);
  return 0;
}
