// The C++ client of the foreign-userland smoke (scripts/userland_smoke.sh): built inside a Debian
// userland with that userland's g++ against the release's kiln tarball, so it proves the
// tarball's C++ API has the ABI of the distribution's libstdc++ (std::string, std::vector and
// kiln::Error cross the library's boundary). Run there through the stand-in driver
// (bench/stand_in_libcuda.c, compute capability 9.0) with the JIT off and no local store: the
// one kernel it gets is downloaded from the mirror at MIRROR_URL (a loopback HTTP server over the
// release's mirror directory) through the userland's own libcurl, checked against the index
// pinned by INDEX_SHA256, and loaded.
//   userland_cpp_client MIRROR_URL INDEX_SHA256 CACHE_DIR
// Exit 0 when the resolve, the download and the NotFound of an unknown URI all happened as
// expected; 1 naming what did not.
#include <cstdio>
#include <string>

#include "kiln/error.hpp"
#include "kiln/kernels.h"
#include "kiln/loader.hpp"
#include "kiln/version.hpp"

namespace {
int fail(const std::string& what) {
  std::fprintf(stderr, "userland C++ client: %s\n", what.c_str());
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) return fail("usage: userland_cpp_client MIRROR_URL INDEX_SHA256 CACHE_DIR");
  const kiln_package& pkg = *kiln_kernels_package();
  std::printf("userland C++ client: libkiln %s (CUDA %s), package %s %s\n", kiln::version(),
              kiln::cuda_version(), pkg.name, pkg.version);
  try {
    kiln::LoaderConfig config = kiln::LoaderConfig::from_env();
    config.artifact_path.clear();
    config.use_installed_store = false;  // nothing local: the mirror tier must serve
    config.mirrors = {argv[1]};
    config.index_sha256 = argv[2];
    config.tuf_root.clear();
    config.cache_dir = argv[3];
    config.offline = false;
    config.disable_jit = true;
    kiln::Loader loader(pkg, config);
    const std::string uri = pkg.kernels[0].uri;

    kiln::Resolution r = loader.resolve(uri, 90);
    if (!r.chosen) return fail("resolve(" + uri + ", 90) chose nothing: " + r.to_json());
    std::printf("userland C++ client: resolve %s for %s: %s %s\n", uri.c_str(), r.device.c_str(),
                r.chosen->tier.c_str(), r.chosen->path.c_str());

    const kiln::KernelHandle& k = loader.get(uri);
    kiln::LoaderStats stats = loader.stats();
    if (stats.mirror_hits != 1 || stats.bytes_fetched == 0)
      return fail("get(" + uri + ") was not served by the mirror: " + stats.json());
    std::printf("userland C++ client: get %s: %zu entries from %s, %llu bytes downloaded\n",
                uri.c_str(), k.functions.size(), k.origin.c_str(),
                static_cast<unsigned long long>(stats.bytes_fetched));

    try {
      loader.get("no_such_kernel");
      return fail("get(no_such_kernel) returned a kernel");
    } catch (const kiln::Error& e) {
      if (e.kind() != kiln::ErrorKind::NotFound)
        return fail(std::string("get(no_such_kernel) threw ") + kiln::to_string(e.kind()) +
                    ", expected not-found: " + e.what());
      const std::string* field = e.field("uri");
      std::printf("userland C++ client: get(no_such_kernel): %s (uri=%s)\n",
                  kiln::to_string(e.kind()), field ? field->c_str() : "?");
    }
  } catch (const kiln::Error& e) {
    return fail(std::string("kiln::Error (") + kiln::to_string(e.kind()) + "): " + e.what());
  }
  std::printf("userland C++ client: ok\n");
  return 0;
}
