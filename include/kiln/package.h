/* A kernel package as a loader serves it: the package's name and version, every specialisation
 * of its registry (URI, family, parameters, entries, source hash) and the files the JIT tier
 * compiles from. A project's build generates one (kiln_add_kernel_package in kiln's CMake
 * package, docs/packages.md) into a C source that defines a function returning a pointer to a
 * static kiln_package; the loader is given that pointer (kiln::Loader's constructor,
 * kiln_loader_create). libkiln itself embeds no kernel set.
 *
 * Plain C data, so that any library can carry its package whatever compiler built it. Every
 * pointer stays valid while the library that defines the package is loaded. Generated, never
 * written by hand: the loader checks it (abi_version, name, version, kernels sorted by URI)
 * and refuses one that does not hold together (kiln_status KILN_ERROR_USAGE). */
#ifndef KILN_PACKAGE_H
#define KILN_PACKAGE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped when the layout below changes; a loader refuses descriptions of another version. */
#define KILN_PACKAGE_ABI_VERSION 1

typedef struct kiln_package_kernel {
  const char* uri;           /* "axpy_dtype_f32" */
  const char* family;        /* the family of the URI above, as kernels.json names it */
  const char* const* params; /* name, value, name, value... in registry order */
  size_t param_pairs;
  const char* const* entries; /* C++ name expressions, registry order */
  size_t entry_count;
  const char* source_hash; /* SHA-256 hex of the family's sources and headers */
} kiln_package_kernel;

typedef struct kiln_package_file {
  const char* path; /* "registry/kernels.json", "kernels/<source>.cu" */
  const char* data;
  size_t size;
} kiln_package_file;

typedef struct kiln_package {
  unsigned abi_version;               /* KILN_PACKAGE_ABI_VERSION */
  const char* name;                   /* "kiln-kernels": lowercase letters, digits, '-' */
  const char* version;                /* the project's VERSION: MAJOR.MINOR.PATCH[-pre] */
  const kiln_package_kernel* kernels; /* sorted by uri (strcmp) */
  size_t kernel_count;
  const kiln_package_file* files; /* the registry and kernels/ sources, for the JIT tier */
  size_t file_count;
} kiln_package;

#ifdef __cplusplus
}
#endif

#endif /* KILN_PACKAGE_H */
