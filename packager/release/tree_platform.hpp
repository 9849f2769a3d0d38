#pragma once
// The host a kiln install tree was built for, read from its binaries' ELF headers, and the facts
// of a libkiln built for another host: `kiln tarball` on an x86_64 build machine packs the
// aarch64 tree that the zig toolchain cross-built (scripts/build_host_tarball.sh), whose
// libkiln cannot be loaded here to be asked its version.
#include <filesystem>
#include <string>

#include "release/loader_facts.hpp"

namespace kiln::release {

// "linux-x86_64" or "linux-aarch64": the platform of a 64-bit little-endian ELF file (e_machine
// EM_X86_64 or EM_AARCH64). Error{Format} naming the file and what its header says otherwise;
// Error{Io} when it cannot be read.
std::string elf_platform(const std::filesystem::path& file);

// The version and CUDA version of `library`, a libkiln of another platform in the install tree
// `prefix`, without loading it: the version from its file name (libkiln.so.<version>, the file
// the SONAME links end at) and the CUDA version from prefix/lib/cmake/kiln/kilnConfig.cmake
// (kiln_CUDA_VERSION, written by the same build). The formats it reads are not known (0).
// Error{Format} naming the file when either is not there to read.
LoaderFacts unloaded_loader_facts(const std::filesystem::path& prefix,
                                  const std::filesystem::path& library);

}  // namespace kiln::release
