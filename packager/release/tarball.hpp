#pragma once
// `kiln tarball`: one relocatable install tree per CUDA version, packed reproducibly.
//
//   kiln-<version>-cuda<M.m>-<platform>/          top directory, e.g.
//   kiln-0.1.0-cuda13.0-linux-x86_64
//     bin/kiln                                    RPATH $ORIGIN/../lib
//     lib/libkiln.so -> libkiln.so.<M.m> -> libkiln.so.<version>
//     lib/libkiln-kernels.so -> ...               the reference package (kiln/kernels.h)
//     lib/cmake/kiln/kilnConfig*.cmake, kilnTargets*.cmake, KilnPackage.cmake
//                                                 find_package(kiln): kiln::kiln, kiln::kernels,
//                                                 kiln::cli, kiln_add_kernel_package
//     include/kiln/*.h*
//     share/kiln/artifacts/<archive stem>/...     verified stores of the reference package, found
//                                                 beside libkiln-kernels by itself
//
// tar (pax restricted) + zstd; entries sorted, mtime fixed, uid/gid 0, modes 0755/0644: the
// same inputs give the same bytes.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "format/manifest.hpp"

namespace kiln::release {

struct TarballOptions {
  std::filesystem::path dist;         // the index and archives `kiln build --dist` wrote
  std::vector<std::string> targets;   // empty: every target in the index
  std::filesystem::path out;          // directory for the tarball
  std::filesystem::path prefix;       // the kiln install tree to pack (cmake --install)
  std::string version;                // release version; empty: kiln::version()
  std::optional<std::int64_t> mtime;  // SOURCE_DATE_EPOCH; nullopt: the newest manifest build_time
  std::function<void(const std::string&)> progress;
};

struct TarballResult {
  std::filesystem::path file;
  std::uint64_t size = 0;
  std::string sha256;  // hex
  std::vector<std::string> targets;
  std::size_t entries = 0;  // files, links and directories packed
};

// Verifies the index and each chosen archive, checks that the prefix holds a complete kiln
// install tree whose libkiln has the release's version and CUDA version, and writes
// <out>/<tarball_file_name(...)> atomically, named for the platform of the tree's binaries
// (elf_platform: one for all of them). A libkiln of this host is loaded and asked its versions;
// one of another host (an aarch64 tree cross-built here) is read without loading it
// (unloaded_loader_facts). Errors name what was looked for and where.
TarballResult build_tarball(const TarballOptions& opts);

// "linux-x86_64", "linux-aarch64": the platform this kiln was built for (a tarball is named for
// the platform of the tree it packs, which may be another).
std::string host_platform();
// Whether a file name is a kiln tarball's: "kiln-" then a version (a digit): no package can be
// named "kiln" (is_package_name refuses it), so no archive name reads this way.
bool is_kiln_tarball_name(const std::string& name);
// kiln-<version>-cuda<M.m>-<platform>.tar.zst
std::string tarball_file_name(const std::string& version, const std::string& cuda,
                              const std::string& platform);
// The install tree this kiln runs from (<exe>/..), when it is one (bin/kiln beside
// lib/cmake/kiln/kilnConfig.cmake); nullopt when running from a build directory.
std::optional<std::filesystem::path> running_install_prefix();
// The install tree `kiln tarball` packs: --prefix (`flag`) when given, else the tree this kiln
// runs from (`running`: running_install_prefix()). Throws Error{Usage} saying how to make one
// when there is neither.
std::filesystem::path tarball_prefix(const std::string& flag,
                                     const std::optional<std::filesystem::path>& running);

// The manifests of every store packed in a tarball (share/kiln/artifacts/*/manifest.json),
// for `kiln compat`. Throws Error{Format} when the file is not a kiln tarball.
std::vector<format::Manifest> tarball_manifests(const std::filesystem::path& tarball);

}  // namespace kiln::release
