/* The C client of the foreign-userland smoke (scripts/userland_smoke.sh): built inside a Debian
 * userland against the release's kiln tarball (find_package(kiln) or pkg-config), run there
 * through the stand-in driver (bench/stand_in_libcuda.c, compute capability 9.0) with the JIT
 * and the network off. It loads every URI of kiln-kernels from the store the tarball installs
 * beside libkiln-kernels (each fatbin read and checked against its manifest digest) and calls
 * kiln_op_axpy. The stand-in launches nothing, so no result is checked: what this proves is that
 * the shipped libraries load, find their store and serve every kernel on this host.
 * Exit 0 when every URI loaded and the op returned KILN_OK; 1 with the URI and kiln's words. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kernels.h"
#include "kiln/kiln.h"
#include "kiln/kiln_ops.h"

static int fail(const char* what, kiln_status s) {
  fprintf(stderr, "userland client: %s failed: %s: %s\n", what, kiln_status_name(s),
          kiln_last_error());
  return 1;
}

int main(void) {
  const kiln_package* pkg = kiln_kernels_package();
  printf("userland client: libkiln %s (CUDA %s), package %s %s, %zu URIs\n", kiln_version(),
         kiln_cuda_version(), pkg->name, pkg->version, pkg->kernel_count);
  kiln_config config;
  kiln_config_init(&config);
  config.offline = 1;
  config.disable_jit = 1;
  kiln_loader* loader = NULL;
  kiln_status s = kiln_loader_create(pkg, &config, &loader);
  if (s != KILN_OK) return fail("kiln_loader_create", s);
  size_t entries = 0;
  for (size_t i = 0; i < pkg->kernel_count; ++i) {
    kiln_kernel* k = NULL;
    s = kiln_get(loader, pkg->kernels[i].uri, &k);
    if (s != KILN_OK) return fail(pkg->kernels[i].uri, s);
    entries += kiln_kernel_entry_count(k);
  }
  float x[4] = {1, 2, 3, 4}, y[4] = {0};
  s = kiln_op_axpy(loader, NULL, y, x, 4, 2.0f, KILN_DTYPE_F32);
  if (s != KILN_OK) return fail("kiln_op_axpy", s);
  size_t length = 0;
  kiln_loader_stats_json(loader, NULL, 0, &length);
  char* stats = malloc(length + 1);
  if (stats && kiln_loader_stats_json(loader, stats, length + 1, NULL) == KILN_OK)
    printf("userland client: stats %s\n", stats);
  free(stats);
  kiln_loader_destroy(loader);
  printf("userland client: ok: %zu URIs (%zu entries) loaded from the installed store, axpy ok\n",
         pkg->kernel_count, entries);
  return 0;
}
