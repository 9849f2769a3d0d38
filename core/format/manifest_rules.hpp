#pragma once
// The field rules of manifest.json (manifests/README.md), shared by its two readers:
// parse_manifest (manifest.cpp: the whole manifest, through a JSON tree) and the loader's
// one-entry reader (manifest_entry.hpp). Both take the key tables and the value checks from
// here, so a rule changed in one place is changed for both; the differential test
// (tests/format/manifest_entry_test.cpp) and fuzz/manifest_entry_fuzz.cpp check that they agree.
#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

#include "format/target.hpp"

namespace kiln::format::manifest_rules {

inline constexpr std::string_view kMarker = "kiln-manifest";

// Every field is required and no other is allowed (an unknown key is refused: a typo must not
// drop a checked field). Each table is indexed by its enum; its order is the canonical one.
enum class RootField {
  format,
  format_version,
  package,
  package_version,
  git_commit,
  cuda_version,
  target,
  build_time,
  artifacts,
  skipped
};
inline constexpr std::array<std::string_view, 10> kRootFields = {
    "format",       "format_version", "package",    "package_version", "git_commit",
    "cuda_version", "target",         "build_time", "artifacts",       "skipped"};

enum class ArtifactField { uri, family, params, entries, source_hash, flags, file, size, sha256 };
inline constexpr std::array<std::string_view, 9> kArtifactFields = {
    "uri", "family", "params", "entries", "source_hash", "flags", "file", "size", "sha256"};

enum class EntryField { name, symbol };
inline constexpr std::array<std::string_view, 2> kEntryFields = {"name", "symbol"};

enum class SkippedField { family, reason };
inline constexpr std::array<std::string_view, 2> kSkippedFields = {"family", "reason"};

static_assert(kRootFields.size() == static_cast<std::size_t>(RootField::skipped) + 1);
static_assert(kArtifactFields.size() == static_cast<std::size_t>(ArtifactField::sha256) + 1);
static_assert(kEntryFields.size() == static_cast<std::size_t>(EntryField::symbol) + 1);
static_assert(kSkippedFields.size() == static_cast<std::size_t>(SkippedField::reason) + 1);

// The position of `key` in `fields`, or nullopt when it is not one of them.
template <std::size_t N>
constexpr std::optional<std::size_t> field_index(const std::array<std::string_view, N>& fields,
                                                 std::string_view key) {
  for (std::size_t i = 0; i < N; ++i)
    if (fields[i] == key) return i;
  return std::nullopt;
}

// `parts` runs of decimal digits joined by '.': "13.0" for parts = 2.
bool is_dotted_number(std::string_view s, int parts);
// A cuda_version: MAJOR.MINOR.
inline bool is_cuda_version(std::string_view s) { return is_dotted_number(s, 2); }
// A file name that stays inside the directory it is unpacked to.
bool is_plain_file_name(std::string_view s);
// An artifact's file: a plain file name that is not the manifest's own.
bool is_artifact_file_name(std::string_view s);
// The target `s` names when it is spelled as Target::str() spells it ("sm_90a", not "SM_90A").
std::optional<Target> canonical_target(std::string_view s);

}  // namespace kiln::format::manifest_rules
