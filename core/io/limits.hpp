#pragma once
// Every limit kiln puts on untrusted bytes, in one place (docs/rules.md, "Untrusted bytes are
// bounded"). docs/security.md holds the same table with the threat model and how each limit is
// enforced; keep the two in step. Exceeding one throws Error{Limit} (exit code 12) naming the
// file, what was exceeded, the value found and the limit.
//
// Limits that live beside the code they guard (documented in the same table):
//   fetch::kMaxIndexBytes (fetch_internal.hpp)  16 MiB index download
//   kMaxChecksumsBytes (packager/mirror/mirror.hpp)             1 MiB SHA256SUMS file
//   kMaxDecompressed (fatbin.cpp)                        1 GiB one decompressed fatbin image
#include <cstddef>
#include <cstdint>

namespace kiln::io::limits {

// JSON (index, manifest, JIT sidecar, any JSON read from a mirror, archive or store).
// Real manifests are a few hundred KiB for thousands of specialisations; 64 MiB leaves room
// for very large packages while keeping a parse's memory bounded.
constexpr std::size_t kMaxJsonBytes = std::size_t{64} << 20;
// Our formats nest at most 4 levels (manifest -> artifacts[] -> entry -> params). nlohmann's
// tree, its destructor and dump() recurse once per level: 100k levels overflow the stack.
constexpr int kMaxJsonDepth = 64;
// An untrusted value quoted in an error message is cut here (with "..." appended).
constexpr std::size_t kMaxQuotedChars = 120;

// Archives (.tar.zst). Decided from the manifest (the first member) before any other member
// is read, and enforced again on the bytes actually decompressed.
// The manifest member itself: read whole into memory, so it is capped first. A manifest takes
// about 850 bytes per artifact, so 20,000 (FlashInfer's ~23,000 cubins in one archive) need
// ~17-20 MiB: the cap is the JSON limit, ~75,000 artifacts of that size.
constexpr std::uint64_t kMaxManifestBytes = kMaxJsonBytes;
// One artifact (fatbin): the largest real ones are tens of MiB (many SASS targets, -G).
constexpr std::uint64_t kMaxMemberBytes = std::uint64_t{1} << 30;
// All members together, as unpacked on disk.
constexpr std::uint64_t kMaxUnpackedBytes = std::uint64_t{4} << 30;
// Members of one archive (manifest included): one per specialisation.
constexpr std::uint64_t kMaxMembers = 100000;

// Entries of one store directory a listing reads (archive directories of every package and
// version, installs in progress, the cache's jit/ and tuf/): a real store has dozens.
constexpr std::uint64_t kMaxStoreEntries = 100000;

// Local files read whole (store manifest.json, index and manifest files given on the command
// line, JIT sidecars): regular files only, never a FIFO or device, at most this many bytes.
constexpr std::uint64_t kMaxLocalFileBytes = kMaxJsonBytes;
// Any other local file read whole (an archive hashed in memory by `kiln inspect`, a wheel):
// as large as an archive may unpack to.
constexpr std::uint64_t kMaxLocalWholeFileBytes = kMaxUnpackedBytes;
// Local artifacts read whole to hand to the driver (a store's fatbins, a JIT cubin).
constexpr std::uint64_t kMaxLocalArtifactBytes = kMaxMemberBytes;

// A package description file (project/package_description.hpp): its specialisations and the
// source files it carries for the JIT tier. FlashInfer-sized packages hold ~25,000 kernels.
constexpr std::uint64_t kMaxPackageKernels = 1000000;
constexpr std::uint64_t kMaxPackageFiles = 100000;

}  // namespace kiln::io::limits
