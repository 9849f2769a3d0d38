#pragma once
// libkiln's loader: finds a kernel for the device in hand (in-process cache, local stores,
// mirrors, JIT last), verifies every byte before the driver sees it, refuses stale packages.
// Resolution order and rules: docs/loader.md and docs/rules.md.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/export.h"
#include "kiln/package.h"

namespace kiln {

struct LoaderConfig {
  // Each field defaults from its environment variable (from_env, one table: docs/loader.md
  // "Settings"); explicit values win.
  std::vector<std::string> artifact_path;  // KILN_ARTIFACT_PATH (':'-separated), searched first
  std::string cache_dir;  // KILN_CACHE_DIR, default $XDG_CACHE_HOME/kiln or ~/.cache/kiln
  std::vector<std::string> mirrors;  // KILN_MIRRORS (whitespace/','-separated URLs)
  std::string index_sha256;          // KILN_INDEX_SHA256: digest that pins a mirror's index
  // KILN_TUF_ROOT: a TUF root.json; mirrors are then TUF repositories and the index and archives
  // are verified through TUF metadata (docs/tuf.md). Empty: the root installed beside libkiln
  // (<prefix>/share/kiln/tuf/root.json) if any, unless index_sha256 is set. Both set: refused.
  std::string tuf_root;
  std::string ca_bundle;            // KILN_CA_BUNDLE: CA certificates for https mirrors
  bool offline = false;             // KILN_OFFLINE=1: no network access, ever
  bool disable_jit = false;         // KILN_DISABLE_JIT=1
  bool allow_stale = false;         // KILN_ALLOW_STALE=1: diagnostic bypass, warned on every use
  bool use_installed_store = true;  // the store installed beside the package's library
  // That store's directory; "" = <dir of the library defining the package>/../share/kiln/artifacts
  // (dladdr). For a description not in a library of an install tree (e.g. linked statically).
  std::string installed_store;
  std::string log_level = "warn";  // KILN_LOG=error|warn|info|debug
  int api_log = 0;                 // KILN_API_LOG=0..3
  std::string log_file;            // KILN_LOG_FILE (%p = pid); default stderr
  std::string nvrtc_library;       // KILN_NVRTC_LIBRARY; "" = libnvrtc.so.13, libnvrtc.so
  std::string cuda_home;           // KILN_CUDA_HOME, else CUDA_HOME, else CUDA_PATH: JIT headers

  // Throws Error{Usage} naming the variable on a bad value.
  KILN_API static LoaderConfig from_env();
  // Same, reading variables through `getenv` (returns null when unset), so tests need not
  // touch the process environment.
  KILN_API static LoaderConfig from_env(const std::function<const char*(const char*)>& getenv);
};

// A boolean setting: exactly 0/1/true/false/yes/no/on/off. Anything else throws Error{Usage}
// naming `name` (the variable or field) and the value.
KILN_API bool parse_bool_setting(const std::string& name, const std::string& value);

// One place a kernel could come from, and why it was or was not taken.
struct Candidate {
  // Tiers, in resolution order.
  std::string tier;    // "memory", "store", "mirror", "jit"
  std::string target;  // "sm_90a", "compute_80", "" when not applicable
  std::string path;    // file or directory or URL looked at
  std::string reason;  // empty for the chosen one
};

struct Resolution {
  std::string uri;
  std::string device;  // target name for the device, e.g. "sm_90"
  std::optional<Candidate> chosen;
  std::vector<Candidate> rejected;
  std::vector<std::string> searched;     // every directory/mirror searched, in order
  KILN_API std::string to_json() const;  // {uri, device, chosen, rejected: [...]}
};

// A loaded kernel for one context: the driver handles of every entry of the specialisation,
// in registry order (reduce_sum has two). Valid for the Loader's lifetime.
struct KernelHandle {
  std::string uri;
  std::vector<void*> functions;  // CUfunction per entry, for the context current at get()
  void* library = nullptr;       // CUlibrary
  std::string origin;            // where the image came from (path or "jit:<key>")
};

// Serves one kernel package (kiln/package.h: a project's generated description, e.g.
// kiln_kernels_package() for kiln's own kernels): its URIs, its stores (archives named for it),
// its staleness rule (its version and source hashes). Several Loaders of different packages live
// side by side in one process. Only the members marked KILN_API are libkiln's API; Impl stays
// private to the library.
class Loader {
 public:
  // Throws Error{Usage} for a description that does not hold together (wrong abi_version,
  // name, version, unsorted kernels) and for bad configuration. `package` must outlive the Loader
  // (a generated description is static data of its library).
  KILN_API explicit Loader(const kiln_package& package,
                           LoaderConfig config = LoaderConfig::from_env());
  KILN_API ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Unique to this Loader for the life of the process, never reused (unlike its address): what
  // per-loader state elsewhere (ops' memos) is keyed by.
  KILN_API std::uint64_t id() const;

  // Loads (once per context) and returns the kernel for the current CUDA context's device.
  // Throws Error (NotFound with the full explanation, Driver, Unsupported, Stale...).
  KILN_API const KernelHandle& get(const std::string& uri);
  // Same, for launching on `stream` (a CUstream): on a cache miss while that stream is being
  // captured into a CUDA Graph, fails with Error{Usage} ("prefetch before capture") and neither
  // reads, downloads nor compiles anything.
  KILN_API const KernelHandle& get(const std::string& uri, void* stream);
  KILN_API void prefetch(const std::vector<std::string>& uris);
  // The decision without loading. cc = compute capability as 90 for 9.0; nullopt = current device.
  KILN_API Resolution resolve(const std::string& uri, std::optional<int> cc = std::nullopt) const;

  KILN_API const LoaderConfig& config() const;
  // The package this Loader serves.
  KILN_API const kiln_package& package() const;

  struct Dim3 {
    unsigned x = 1, y = 1, z = 1;
  };
  // cuLaunchKernel on entry `entry` of a handle from get(); throws Error{Driver} with the
  // driver's error name and the URI.
  KILN_API void launch(const KernelHandle& kernel, std::size_t entry, Dim3 grid, Dim3 block,
                       std::size_t shared_bytes, void* stream, void** args) const;

  struct Impl;

 private:
  // With explicit dependencies (fakes for the driver, disk, compiler and fetcher):
  // make_loader in the private header loader/src/loader_factory.hpp, for tests.
  explicit Loader(std::unique_ptr<Impl> impl);
  friend struct LoaderFactory;
  friend struct LoaderAccess;  // loader/src/loader_access.hpp: ops reach the loader's driver
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
