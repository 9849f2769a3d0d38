// The C ABI over kiln::Loader: exceptions never cross it; each becomes a status and a
// thread-local message.
#include "kiln/kiln.h"
#include "kiln/kiln_ops.h"

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "c_api_internal.hpp"
#include "format/manifest.hpp"
#include "kiln/error.hpp"
#include "kiln/loader.hpp"
#include "kiln/version.hpp"
#include "loader_factory.hpp"
#include "plan/resolver.hpp"
#include "project/package.hpp"
#include "project/registry.hpp"
#include "runtime/environment.hpp"

// kiln_kernel stays incomplete: a kiln_kernel* is the address of the loader's KernelHandle.

namespace {
thread_local std::string t_last_error;
thread_local std::vector<kiln::ErrorField> t_last_fields;
}  // namespace

kiln_status kiln::c_api::fail(kiln_status st, const std::string& msg) {
  t_last_error = msg;
  t_last_fields.clear();
  return st;
}

kiln_status kiln::c_api::fail(const kiln::Error& e) {
  t_last_error = e.what();
  t_last_fields = e.fields();
  return static_cast<kiln_status>(kiln::exit_code(e.kind()));
}

namespace {

using kiln::c_api::fail;

template <typename F>
kiln_status guarded(F&& f) {
  try {
    f();
    return KILN_OK;
  } catch (const kiln::Error& e) {
    return fail(e);
  } catch (const std::bad_alloc&) {
    return fail(KILN_ERROR_INTERNAL, "out of memory");
  } catch (const std::exception& e) {
    return fail(KILN_ERROR_INTERNAL, std::string("internal error: ") + e.what());
  }
}

const kiln::KernelHandle& handle_of(const kiln_kernel* k) {
  return *reinterpret_cast<const kiln::KernelHandle*>(k);
}
kiln_kernel* to_c(const kiln::KernelHandle& h) {
  return reinterpret_cast<kiln_kernel*>(const_cast<kiln::KernelHandle*>(&h));
}

}  // namespace

extern "C" {

void kiln_config_init(kiln_config* c) {
  if (!c) return;
  *c = kiln_config{};
  c->struct_size = sizeof(kiln_config);
  c->offline = c->disable_jit = c->allow_stale = c->api_log = KILN_FROM_ENV;
}

}  // extern "C"

namespace {

// The sizes a caller's kiln_config may have: this header's, and each earlier header's, which
// ended just before a field added later (such a caller gets that field from the environment).
bool is_known_config_size(std::size_t size) {
  return size == sizeof(kiln_config) || size == offsetof(kiln_config, tuf_root) ||
         size == offsetof(kiln_config, index_sha256);
}

// Whether the caller's struct reaches a field added later (`offset`: its offsetof).
bool reaches(const kiln_config& config, std::size_t offset) { return config.struct_size > offset; }

void set_boolean(const char* name, int v, bool& field) {
  if (v == KILN_FROM_ENV) return;
  if (v != 0 && v != 1)
    throw kiln::Error(kiln::ErrorKind::Usage, std::string("kiln_config.") + name + "=" +
                                                  std::to_string(v) +
                                                  ": expected 0, 1 or KILN_FROM_ENV");
  field = v == 1;
}

// A value given as a string is read by its variable's own parser (the one table), reading that
// one variable: not the whole environment again. "" leaves the field empty, as for the variable.
kiln::LoaderConfig as_variable(const char* variable, const char* value) {
  kiln::runtime::Environment e;
  kiln::runtime::read_env_variable(e, variable, [value](const char*) { return value; });
  return std::move(e.loader);
}

// Same, for a value the parser may refuse: the variable's rule and message, naming the field
// instead, since the caller set the field and not the variable.
kiln::LoaderConfig as_checked_field(const char* field, const char* variable, const char* value) {
  try {
    return as_variable(variable, value);
  } catch (const kiln::Error& e) {
    const std::string msg = e.what();
    if (msg.rfind(variable, 0) != 0) throw;
    const std::string name = std::string("kiln_config.") + field;
    throw kiln::Error(e.kind(), name + msg.substr(std::strlen(variable)),
                      {{"field", name}, {"value", value}});
  }
}

// The environment's configuration with the fields `config` sets laid over it.
kiln::LoaderConfig loader_config(const kiln_config& config) {
  kiln::LoaderConfig lc = kiln::LoaderConfig::from_env();
  if (config.artifact_path)
    lc.artifact_path = as_variable("KILN_ARTIFACT_PATH", config.artifact_path).artifact_path;
  if (config.mirrors) lc.mirrors = as_variable("KILN_MIRRORS", config.mirrors).mirrors;
  if (config.cache_dir) lc.cache_dir = config.cache_dir;
  set_boolean("offline", config.offline, lc.offline);
  set_boolean("disable_jit", config.disable_jit, lc.disable_jit);
  set_boolean("allow_stale", config.allow_stale, lc.allow_stale);
  if (config.log_level) lc.log_level = config.log_level;
  if (config.api_log != KILN_FROM_ENV) lc.api_log = config.api_log;
  if (config.log_file) lc.log_file = config.log_file;
  if (reaches(config, offsetof(kiln_config, tuf_root)) && config.tuf_root)
    lc.tuf_root = config.tuf_root;
  if (reaches(config, offsetof(kiln_config, index_sha256)) && config.index_sha256)
    lc.index_sha256 =
        as_checked_field("index_sha256", "KILN_INDEX_SHA256", config.index_sha256).index_sha256;
  return lc;
}

}  // namespace

kiln_status kiln::c_api::loader_create_with(const kiln_package* package, const kiln_config* config,
                                            kiln::plan::LoaderDeps deps, kiln_loader** out) {
  if (!out) return fail(KILN_ERROR_USAGE, "kiln_loader_create: out is NULL");
  *out = nullptr;
  if (!package)
    return fail(KILN_ERROR_USAGE,
                "kiln_loader_create: package is NULL (pass a package description, e.g. "
                "kiln_kernels_package() from kiln/kernels.h, or your project's generated one)");
  if (config && !is_known_config_size(config->struct_size))
    return fail(KILN_ERROR_USAGE,
                "kiln_loader_create: config->struct_size is " +
                    std::to_string(config->struct_size) + ", this libkiln expects " +
                    std::to_string(sizeof(kiln_config)) + " (call kiln_config_init first)");
  return guarded([&] {
    kiln::LoaderConfig lc = config ? loader_config(*config) : kiln::LoaderConfig::from_env();
    auto l = std::make_unique<kiln_loader>();
    l->loader = kiln::make_loader(*package, std::move(lc), std::move(deps));
    *out = l.release();
  });
}

extern "C" {

kiln_status kiln_loader_create(const kiln_package* package, const kiln_config* config,
                               kiln_loader** out) {
  return kiln::c_api::loader_create_with(package, config, kiln::plan::LoaderDeps{}, out);
}

void kiln_loader_destroy(kiln_loader* loader) { delete loader; }

kiln_status kiln_loader_stats_json(kiln_loader* loader, char* buffer, size_t size,
                                   size_t* length) {
  return kiln::c_api::guarded_op("kiln_loader_stats_json", loader, [&](kiln::Loader& l) {
    const std::string json = l.stats().json();
    if (length) *length = json.size();
    if (!buffer && size == 0) return;  // the length alone was asked
    if (!buffer)
      throw kiln::Error(kiln::ErrorKind::Usage,
                        "kiln_loader_stats_json: buffer is NULL with size " + std::to_string(size))
          .with("argument", "buffer");
    if (size <= json.size())
      throw kiln::Error(kiln::ErrorKind::Usage,
                        "kiln_loader_stats_json: the statistics take " +
                            std::to_string(json.size() + 1) + " bytes with the terminating NUL; " +
                            "the buffer has " + std::to_string(size))
          .with("argument", "size")
          .with("expected", std::to_string(json.size() + 1))
          .with("actual", std::to_string(size));
    std::memcpy(buffer, json.c_str(), json.size() + 1);
  });
}

kiln_status kiln_get(kiln_loader* loader, const char* uri, kiln_kernel** out) {
  if (!loader || !uri || !out)
    return fail(KILN_ERROR_USAGE, std::string("kiln_get: ") +
                                      (!loader ? "loader"
                                       : !uri  ? "uri"
                                               : "out") +
                                      " is NULL");
  *out = nullptr;
  return guarded([&] { *out = to_c(loader->loader->get(uri)); });
}

kiln_status kiln_get_for_stream(kiln_loader* loader, const char* uri, void* stream,
                                kiln_kernel** out) {
  if (!loader || !uri || !out)
    return fail(KILN_ERROR_USAGE, std::string("kiln_get_for_stream: ") +
                                      (!loader ? "loader"
                                       : !uri  ? "uri"
                                               : "out") +
                                      " is NULL");
  *out = nullptr;
  return guarded([&] { *out = to_c(loader->loader->get(uri, stream)); });
}

kiln_status kiln_prefetch(kiln_loader* loader, const char* const* uris, size_t count) {
  if (!loader) return fail(KILN_ERROR_USAGE, "kiln_prefetch: loader is NULL");
  if (count && !uris) return fail(KILN_ERROR_USAGE, "kiln_prefetch: uris is NULL");
  std::vector<std::string> list;
  for (size_t i = 0; i < count; ++i) {
    if (!uris[i])
      return fail(KILN_ERROR_USAGE, "kiln_prefetch: uris[" + std::to_string(i) + "] is NULL");
    list.emplace_back(uris[i]);
  }
  return guarded([&] { loader->loader->prefetch(list); });
}

size_t kiln_kernel_entry_count(const kiln_kernel* kernel) {
  return kernel ? handle_of(kernel).functions.size() : 0;
}

kiln_status kiln_kernel_function(const kiln_kernel* kernel, size_t entry, void** function) {
  if (!kernel || !function)
    return fail(KILN_ERROR_USAGE, std::string("kiln_kernel_function: ") +
                                      (!kernel ? "kernel" : "function") + " is NULL");
  const auto& h = handle_of(kernel);
  if (entry >= h.functions.size())
    return fail(KILN_ERROR_USAGE, h.uri + " has " + std::to_string(h.functions.size()) +
                                      " entries; entry " + std::to_string(entry) + " asked for");
  *function = h.functions[entry];
  return KILN_OK;
}

// kiln_launch and kiln_launch_args: the same NULL checks, then the loader's launch, counted when
// `arg_count` is given (checked against the kernel's parameter list).
static kiln_status launch_kernel(const char* fn, kiln_loader* loader, const kiln_kernel* kernel,
                                 size_t entry, const unsigned grid[3], const unsigned block[3],
                                 size_t shared_bytes, void* stream, void** args,
                                 const size_t* arg_count) {
  if (!loader || !kernel || !grid || !block)
    return fail(KILN_ERROR_USAGE, std::string(fn) + ": " +
                                      (!loader   ? "loader"
                                       : !kernel ? "kernel"
                                       : !grid   ? "grid"
                                                 : "block") +
                                      " is NULL");
  return guarded([&] {
    const kiln::Loader::Dim3 g{grid[0], grid[1], grid[2]}, b{block[0], block[1], block[2]};
    if (arg_count)
      loader->loader->launch(handle_of(kernel), entry, g, b, shared_bytes, stream, args, *arg_count);
    else
      loader->loader->launch(handle_of(kernel), entry, g, b, shared_bytes, stream, args);
  });
}

kiln_status kiln_launch(kiln_loader* loader, const kiln_kernel* kernel, size_t entry,
                        const unsigned grid[3], const unsigned block[3], size_t shared_bytes,
                        void* stream, void** args) {
  return launch_kernel("kiln_launch", loader, kernel, entry, grid, block, shared_bytes, stream,
                       args, nullptr);
}

kiln_status kiln_launch_args(kiln_loader* loader, const kiln_kernel* kernel, size_t entry,
                             const unsigned grid[3], const unsigned block[3], size_t shared_bytes,
                             void* stream, void** args, size_t arg_count) {
  return launch_kernel("kiln_launch_args", loader, kernel, entry, grid, block, shared_bytes, stream,
                       args, &arg_count);
}

kiln_status kiln_kernel_argument_count(kiln_loader* loader, const kiln_kernel* kernel,
                                       size_t entry, size_t* count) {
  if (!loader || !kernel || !count)
    return fail(KILN_ERROR_USAGE, std::string("kiln_kernel_argument_count: ") +
                                      (!loader ? "loader" : !kernel ? "kernel" : "count") +
                                      " is NULL");
  return guarded([&] { *count = loader->loader->arguments(handle_of(kernel), entry).size(); });
}

kiln_status kiln_kernel_argument_info(kiln_loader* loader, const kiln_kernel* kernel,
                                      size_t entry, size_t index, size_t* offset, size_t* size) {
  if (!loader || !kernel || !offset || !size)
    return fail(KILN_ERROR_USAGE, std::string("kiln_kernel_argument_info: ") +
                                      (!loader   ? "loader"
                                       : !kernel ? "kernel"
                                       : !offset ? "offset"
                                                 : "size") +
                                      " is NULL");
  return guarded([&] {
    const auto& h = handle_of(kernel);
    const auto& args = loader->loader->arguments(h, entry);
    if (index >= args.size())
      throw kiln::Error(kiln::ErrorKind::Usage,
                        h.uri + " takes " + std::to_string(args.size()) + " arguments; index " +
                            std::to_string(index) + " asked for")
          .with("uri", h.uri)
          .with("argument", "index");
    *offset = args[index].offset;
    *size = args[index].size;
  });
}

const char* kiln_last_error(void) { return t_last_error.c_str(); }

// Kept for callers of the first ops API (kiln_ops.h); the ops report into the same slot.
const char* kiln_ops_last_error(void) { return kiln_last_error(); }

const char* kiln_last_error_field(const char* name) {
  if (!name) return nullptr;
  for (const auto& f : t_last_fields)
    if (f.name == name) return f.value.c_str();
  return nullptr;
}

const char* kiln_version(void) { return kiln::version(); }
const char* kiln_cuda_version(void) { return kiln::cuda_version(); }
int kiln_manifest_format(void) { return kiln::format::kManifestFormat; }
int kiln_index_format(void) { return kiln::format::kIndexFormat; }

const char* kiln_package_source_hash(const kiln_package* package, const char* uri) {
  if (!package || !uri) return nullptr;
  try {
    // Looked up and checked as a Loader does; the hash is the description's own static string.
    const kiln_package_kernel* k = kiln::project::Package(package).kernel(uri);
    return k ? k->source_hash : nullptr;
  } catch (...) {
    return nullptr;
  }
}

const char* kiln_status_name(kiln_status status) {
  if (status == KILN_OK) return "ok";
  if (status < KILN_ERROR_INTERNAL || status > KILN_ERROR_LIMIT) return "unknown";
  return kiln::to_string(static_cast<kiln::ErrorKind>(static_cast<int>(status) - 1));
}

}  // extern "C"
