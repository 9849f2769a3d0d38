#pragma once
// libkiln's loader: finds a kernel for the device in hand (in-process cache, local stores,
// mirrors, JIT last), verifies every byte before the driver sees it, refuses stale packages.
// Resolution order and rules: docs/loader.md and docs/rules.md.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/config.hpp"
#include "kiln/export.h"
#include "kiln/package.h"
#include "kiln/resolution.hpp"

namespace kiln {

// A loaded kernel for one context: the driver handles of every entry of the specialisation,
// in registry order (a two-pass reduction has two). Valid for the Loader's lifetime.
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
