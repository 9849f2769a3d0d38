/* kiln C ABI: the same loader as kiln/loader.hpp, for C and for language bindings.
 * Every function returns a kiln_status; on failure kiln_last_error() holds the message for the
 * calling thread until its next failing call. Status values equal the CLI exit codes
 * (docs/exit-codes.md), one per kiln::ErrorKind. */
#ifndef KILN_KILN_H
#define KILN_KILN_H

#include <stddef.h>

#include "kiln/export.h"
#include "kiln/package.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kiln_status {
  KILN_OK = 0,
  KILN_ERROR_INTERNAL = 1,
  KILN_ERROR_USAGE = 2,
  KILN_ERROR_INTEGRITY = 3,
  KILN_ERROR_STALE = 4,
  KILN_ERROR_UNSUPPORTED = 5,
  KILN_ERROR_NOT_FOUND = 6,
  KILN_ERROR_COMPILE = 7,
  KILN_ERROR_NETWORK = 8,
  KILN_ERROR_IO = 9,
  KILN_ERROR_FORMAT = 10,
  KILN_ERROR_DRIVER = 11,
  KILN_ERROR_LIMIT = 12
} kiln_status;

typedef struct kiln_loader kiln_loader;
/* A loaded kernel for one context; valid until its loader is destroyed. */
typedef struct kiln_kernel kiln_kernel;

/* Booleans: KILN_FROM_ENV (-1) = take the environment variable, 0 = no, 1 = yes.
 * Strings: NULL = take the environment variable. */
#define KILN_FROM_ENV (-1)
typedef struct kiln_config {
  size_t struct_size;        /* sizeof(kiln_config): lets later fields be added compatibly */
  const char* artifact_path; /* ':'-separated store directories (KILN_ARTIFACT_PATH) */
  const char* cache_dir;     /* KILN_CACHE_DIR */
  const char* mirrors;       /* whitespace- or ','-separated URLs (KILN_MIRRORS) */
  int offline;               /* KILN_OFFLINE */
  int disable_jit;           /* KILN_DISABLE_JIT */
  int allow_stale;           /* KILN_ALLOW_STALE: diagnostic bypass, warned on every use */
  const char* log_level;     /* KILN_LOG: error|warn|info|debug */
  int api_log;               /* KILN_API_LOG 0..3, or KILN_FROM_ENV */
  const char* log_file;      /* KILN_LOG_FILE, %p = pid */
  /* Later fields: a struct_size that ends before one takes it from the environment. */
  const char* tuf_root; /* KILN_TUF_ROOT: TUF root.json; mirrors are TUF repositories */
  /* KILN_INDEX_SHA256: the digest pinning this loader's package index on its mirrors, 64
   * lowercase hex digits; "" = none. The variable pins one index per process: a process serving
   * several packages from pinned mirrors gives each loader its own here. */
  const char* index_sha256;
} kiln_config;

/* Fills *config with "everything from the environment". */
KILN_API void kiln_config_init(kiln_config* config);

/* A loader serving `package` (kiln/package.h: a project's generated description, e.g.
 * kiln_kernels_package() of kiln/kernels.h); it must outlive the loader. config NULL: everything
 * from the environment. A bad environment value is KILN_ERROR_USAGE with the variable named; so
 * is a NULL or malformed package. */
KILN_API kiln_status kiln_loader_create(const kiln_package* package, const kiln_config* config,
                                        kiln_loader** out);
KILN_API void kiln_loader_destroy(kiln_loader* loader);

/* What the loader did since it was made, as JSON text (docs/loader.md, "Statistics"): gets
 * served by each tier (in-process, store, mirror, JIT), misses, bytes read, verified and
 * fetched, time per tier, JIT compiles, rejected candidates by reason. Counters only grow: the
 * work of a stretch is the difference of two calls. Writes the text and its terminating NUL
 * into buffer[0..size) and its length (without the NUL) into *length (length may be NULL).
 * buffer NULL with size 0: only *length is set (ask, allocate length + 1, ask again). A buffer
 * too small is KILN_ERROR_USAGE (fields "expected", "actual": the bytes needed and given) and
 * is left untouched. */
KILN_API kiln_status kiln_loader_stats_json(kiln_loader* loader, char* buffer, size_t size,
                                            size_t* length);

/* Loads (once per CUDA context) the kernel `uri` for the current context's device. */
KILN_API kiln_status kiln_get(kiln_loader* loader, const char* uri, kiln_kernel** out);
/* Same, for launching on `stream` (a CUstream): a miss while the stream is being captured
 * fails with KILN_ERROR_USAGE ("prefetch before capture") without reading or compiling. */
KILN_API kiln_status kiln_get_for_stream(kiln_loader* loader, const char* uri, void* stream,
                                         kiln_kernel** out);
/* Loads every URI; attempts all of them and reports every failure in one message. */
KILN_API kiln_status kiln_prefetch(kiln_loader* loader, const char* const* uris, size_t count);

KILN_API size_t kiln_kernel_entry_count(const kiln_kernel* kernel);
/* The CUfunction of entry `entry` (registry order). */
KILN_API kiln_status kiln_kernel_function(const kiln_kernel* kernel, size_t entry, void** function);

/* cuLaunchKernel on entry `entry`; grid and block are 3 values each; args[i] points at the
 * value of parameter i, arg_count of them. A count other than the kernel's parameter count
 * (where the driver reports it, CUDA 12.4+), shared_bytes over 2^32-1 or a grid or block
 * dimension of 0 is KILN_ERROR_USAGE naming the kernel, the expected and the given (fields
 * "expected", "actual"), and nothing is launched. */
KILN_API kiln_status kiln_launch_args(kiln_loader* loader, const kiln_kernel* kernel, size_t entry,
                                      const unsigned grid[3], const unsigned block[3],
                                      size_t shared_bytes, void* stream, void** args,
                                      size_t arg_count);
/* The same without a count (the first C ABI): args must hold as many pointers as the kernel
 * has parameters, which nothing can check; prefer kiln_launch_args. */
KILN_API kiln_status kiln_launch(kiln_loader* loader, const kiln_kernel* kernel, size_t entry,
                                 const unsigned grid[3], const unsigned block[3],
                                 size_t shared_bytes, void* stream, void** args);
/* The parameters of entry `entry` as the driver reports them: their count, and each one's
 * byte offset and size. KILN_ERROR_UNSUPPORTED when the driver cannot report them (older than
 * CUDA 12.4). */
KILN_API kiln_status kiln_kernel_argument_count(kiln_loader* loader, const kiln_kernel* kernel,
                                                size_t entry, size_t* count);
KILN_API kiln_status kiln_kernel_argument_info(kiln_loader* loader, const kiln_kernel* kernel,
                                               size_t entry, size_t index, size_t* offset,
                                               size_t* size);

/* The message of the calling thread's last failure ("" if none). Valid until its next call. */
KILN_API const char* kiln_last_error(void);
/* A context field of the calling thread's last failure (kiln::Error::field: "variable",
 * "value", "uri", "target", "path", "field", "expected", "actual", ...; docs/exit-codes.md),
 * or NULL when it has none of that name. Valid until the thread's next kiln call. */
KILN_API const char* kiln_last_error_field(const char* name);

/* Facts about this build of libkiln, for version-compatibility checks (`kiln compat --loader
 * LIB` reads them with dlsym). Strings are static; never free them. */
/* package version from VERSION, e.g. "0.1.0" */
KILN_API const char* kiln_version(void);
/* CUDA toolkit major.minor it was built with, "13.0" */
KILN_API const char* kiln_cuda_version(void);
/* archive manifest format version it reads */
KILN_API int kiln_manifest_format(void);
/* release index format version it reads */
KILN_API int kiln_index_format(void);
/* The source hash `package` gives `uri` (its description's string): a packaged artifact with
 * another hash is stale for it. NULL when the package has no such URI or is malformed. */
KILN_API const char* kiln_package_source_hash(const kiln_package* package, const char* uri);
/* "not-found", "usage", ... */
KILN_API const char* kiln_status_name(kiln_status status);

#ifdef __cplusplus
}
#endif

#endif /* KILN_KILN_H */
