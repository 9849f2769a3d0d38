#pragma once
// The one check of an archive's manifest against the index entry that pinned its bytes. A digest
// in the index proves the bytes are the ones the index meant; it does not prove the index put
// them under the right target or release. Every path that installs or verifies from an index
// (kiln fetch, the loader's mirror tier, kiln install INDEX, kiln verify INDEX, kiln mirror
// verify/stage/sync, kiln tarball, kiln compat INDEX) calls this one rule, so they refuse the
// same archives with the same kinds and words.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "format/manifest.hpp"
#include "kiln/error.hpp"
#include "store/store.hpp"

namespace kiln::store {

// One field on which a manifest and the index entry that pinned its archive disagree, with both
// values as fields (callers build their own report from them, never parse a message).
struct ManifestIndexMismatch {
  ErrorKind kind = ErrorKind::Integrity;  // Integrity for target, Stale for the versions
  std::string field;                      // "target", "package_version" or "cuda_version"
  std::string in_manifest;
  std::string in_index;
};

// The rule itself: target against the entry, package_version and cuda_version against the
// index, in that order. Pure. Empty: they agree.
std::vector<ManifestIndexMismatch> manifest_index_mismatches(const format::Manifest& manifest,
                                                             const format::IndexEntry& entry,
                                                             const format::Index& index);

// The manifest's target, package_version and cuda_version against the index entry (target) and
// the index (versions). One problem per differing field, naming the archive, the field and both
// values. Kinds: a target mismatch is Integrity (the index pinned another target's bytes); a
// package or CUDA version mismatch is Stale (bytes of another release), as `kiln install` has it.
// Pure: no I/O. `archive_origin` names the archive, `index_origin` the index, in messages.
std::vector<VerifyProblem> manifest_index_problems(const format::Manifest& manifest,
                                                   const format::IndexEntry& entry, const format::Index& index,
                                                   const std::string& archive_origin,
                                                   const std::string& index_origin);

// As above, throwing Error of the most severe kind (Integrity before Stale) with every problem
// in the message; returns when the manifest agrees with the index.
// `action` completes "refusing to <action> <archive>" in the message ("install", "make a wheel
// of"). The error's fields: path, index, field, actual (manifest), expected (index).
void require_manifest_matches_index(const format::Manifest& manifest, const format::IndexEntry& entry,
                                    const format::Index& index, const std::string& archive_origin,
                                    const std::string& index_origin,
                                    const std::string& action = "install");

// The manifest of a tar.zst archive read from its first member alone, through the archive
// stream install_archive uses, without decompressing the rest: what a caller needs to decide
// before unpacking. nullopt when the first member is not named manifest.json (install_archive
// refuses such an archive as Format anyway). Throws Error{Format} for an entry the stream
// refuses or a manifest that does not parse (Stale for a foreign format version), Error{Limit}
// for a manifest larger than io::limits::kMaxManifestBytes, Error{NotFound}/{Io} when the file
// cannot be read.
std::optional<format::Manifest> read_leading_manifest(const std::filesystem::path& archive);

}  // namespace kiln::store
