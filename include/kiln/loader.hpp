#pragma once
// libkiln's loader: finds a kernel for the device in hand (in-process cache, local stores,
// mirrors, JIT last), verifies every byte before the driver sees it, refuses stale packages.
// Resolution order and rules: docs/loader.md and docs/rules.md.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/config.hpp"
#include "kiln/export.h"
#include "kiln/package.h"
#include "kiln/resolution.hpp"

namespace kiln {

// One parameter of a kernel entry, as the driver reports it: its byte offset in the parameter
// buffer and its size (a pointer 8, an int or float 4, a struct by value its size).
struct KernelArgument {
  std::size_t offset = 0, size = 0;
};

// A loaded kernel for one context: the driver handles of every entry of the specialisation,
// in registry order (a two-pass reduction has two). Valid for the Loader's lifetime.
struct KernelHandle {
  std::string uri;
  std::vector<void*> functions;  // CUfunction per entry, for the context current at get()
  void* library = nullptr;       // CUlibrary
  std::string origin;            // where the image came from (path or "jit:<key>")
  int device = 0;                // ordinal of the device of the context current at get()
  // Per entry, its parameters in order (cuKernelGetParamInfo), or nullopt where the driver
  // cannot say (older than CUDA 12.4): launches are checked against them.
  std::vector<std::optional<std::vector<KernelArgument>>> arguments;
};

// What a Loader did since it was made (Loader::stats()): counters that only grow, so the work of
// a stretch of a program is `after.since(before)`. Each counter is read on its own: a snapshot
// taken while other threads call get() may count a get in one field and not yet in another.
struct LoaderStats {
  // Gets served, by where the kernel came from: the in-process table (a warm get), a local
  // store, a mirror (downloaded into the cache, then loaded from there), JIT (NVRTC, or its
  // result found in <cache>/jit).
  std::uint64_t memory_hits = 0, store_hits = 0, mirror_hits = 0, jit_hits = 0;
  std::uint64_t misses = 0;  // gets no tier served (the get threw)
  // Artifact bytes read from disk (every candidate read, served or not); bytes whose size and
  // SHA-256 matched before the driver saw them (store, mirror and JIT images); bytes the mirror
  // tier downloaded and verified (archives; the index is not counted).
  std::uint64_t bytes_read = 0, bytes_verified = 0, bytes_fetched = 0;
  // Wall time spent in each tier, served or not (nanoseconds, steady clock).
  std::uint64_t store_ns = 0, mirror_ns = 0, jit_ns = 0;
  std::uint64_t jit_compiles = 0;  // NVRTC runs (a result found in the JIT cache is none)
  // Candidates passed over, by reason: the kind of the refusal ("stale", "integrity",
  // "unsupported", "not-found", ...: to_string(ErrorKind)); every kind is present, 0 or more.
  std::map<std::string, std::uint64_t> rejected;

  // This minus `earlier` (a snapshot of the same Loader taken before), field by field.
  KILN_API LoaderStats since(const LoaderStats& earlier) const;
  // The stable JSON form (docs/loader.md, "Statistics"): {"stats_format": 1, "hits": {...}, ...}.
  KILN_API std::string json() const;
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
  // The same for a driver that is not here (`kiln resolve --driver 12.8`): `driver` is
  // cuDriverGetVersion's number (12080 for CUDA 12.8) weighed against every candidate's toolkit
  // and the JIT tier's NVRTC instead of this machine's driver; nullopt = this machine's, as above.
  KILN_API Resolution resolve(const std::string& uri, std::optional<int> cc,
                              std::optional<int> driver) const;

  KILN_API const LoaderConfig& config() const;
  // What this Loader did since it was made (LoaderStats); cheap: no lock, no allocation beyond
  // the result. Counting is always on.
  KILN_API LoaderStats stats() const;
  // The package this Loader serves.
  KILN_API const kiln_package& package() const;

  struct Dim3 {
    unsigned x = 1, y = 1, z = 1;
  };
  // cuLaunchKernel on entry `entry` of a handle from get(), with `arg_count` arguments: args[i]
  // points at the value of parameter i. Throws Error{Usage} naming the kernel, the expected and
  // the given when arg_count is not the entry's parameter count (where the driver reports it:
  // KernelHandle::arguments), when shared_bytes exceeds 2^32-1 or a grid or block dimension is
  // 0; Error{Driver} with the driver's error name and the URI.
  KILN_API void launch(const KernelHandle& kernel, std::size_t entry, Dim3 grid, Dim3 block,
                       std::size_t shared_bytes, void* stream, void** args,
                       std::size_t arg_count) const;
  // The same without a count: args must hold as many pointers as the entry has parameters
  // (nothing can check that). Kept for callers written before the count; prefer the above.
  KILN_API void launch(const KernelHandle& kernel, std::size_t entry, Dim3 grid, Dim3 block,
                       std::size_t shared_bytes, void* stream, void** args) const;
  // The entry's parameters (KernelHandle::arguments); Error{Unsupported} naming the driver call
  // when the driver cannot report them, Error{Usage} for an entry the kernel does not have.
  KILN_API const std::vector<KernelArgument>& arguments(const KernelHandle& kernel,
                                                        std::size_t entry = 0) const;

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
