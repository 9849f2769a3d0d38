#pragma once
// The on-disk formats shared by the packager and the loader: archive manifest, release
// index, and the names of archives. Written down in manifests/README.md (grammar, fields,
// version history); keep the two in step.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "format/provenance.hpp"

namespace kiln::format {

// Version history: 1 = first release (kiln 0.1.0, kiln's own kernels only); 2 = a top-level
// "package" (the kernel package's name), which every archive, index and store name carries.
// Index 3 = an optional "description" entry pinning the package's description file
// (<name>-<version>.package.json) beside the index; index 2 is still read (no description).
// Index 4 = a required "provenance" object (how the release was built); 2 and 3 still read.
// Index 5 = each archive carries its own "cuda_version" (one index lists archives of several
// toolkits; (cuda_version, target) unique) and the top-level one is gone; reading 2 to 4, every
// archive takes the file's top-level cuda_version.
constexpr int kManifestFormat = 2;
constexpr int kIndexFormat = 5;
constexpr int kOldestIndexFormat = 2;

struct ArtifactEntry {
  struct Entry {
    std::string name;    // C++ name expression, e.g. "kiln::axpy_kernel<float>"
    std::string symbol;  // mangled symbol in the image, what cuLibraryGetKernel takes
  };
  std::string uri;
  std::string family;
  std::vector<std::pair<std::string, std::string>> params;  // registry order
  std::vector<Entry> entries;
  std::string source_hash;
  std::vector<std::string> flags;  // exact compile flags (nvcc argv after the compiler path)
  std::string file;                // path inside the archive / store directory: "<uri>.fatbin"
  std::uint64_t size = 0;
  std::string sha256;
};

struct SkippedFamily {
  std::string family;
  std::string reason;  // e.g. "supports only sm_90a"
};

struct Manifest {
  int format_version = kManifestFormat;
  std::string package;  // the kernel package's name (is_package_name)
  std::string package_version;
  std::string git_commit;
  std::string cuda_version;              // toolkit major.minor, e.g. "13.0"
  std::string target;                    // "sm_90a", "compute_80"
  std::int64_t build_time = 0;           // seconds since the epoch (SOURCE_DATE_EPOCH when set)
  std::vector<ArtifactEntry> artifacts;  // sorted by uri
  std::vector<SkippedFamily> skipped;    // sorted by family

  const ArtifactEntry* find(std::string_view uri) const;
};

struct IndexEntry {
  std::string file;  // archive file name, beside the index
  std::string target;
  std::string cuda_version;  // the toolkit that built it, "13.0" (format 5; before, the index's)
  std::uint64_t size = 0;
  std::string sha256;
};

// A file of the release other than its archives, pinned by the index like one.
struct IndexFile {
  std::string file;  // beside the index
  std::uint64_t size = 0;
  std::string sha256;
};

struct Index {
  int format_version = kIndexFormat;
  std::string package;
  std::string package_version;
  std::string git_commit;
  // Sorted by target (SASS first, then arch), then newest toolkit first; (cuda_version, target)
  // unique.
  std::vector<IndexEntry> archives;
  // The package's description (<name>-<version>.package.json, project/package_description.hpp),
  // from index format 3 on; absent in format 2 and for releases published without one.
  std::optional<IndexFile> description;
  // Required from index format 4 on; absent in 2 and 3.
  std::optional<Provenance> provenance;
};

// The toolkits of the index's archives, each once, newest first ("13.0", "12.9").
std::vector<std::string> index_toolkits(const Index& idx);

// Serialisation is canonical (fixed key order, 2-space indent, trailing newline) so that the
// same values always give the same bytes.
// An index is written in its format_version; before 5 the top-level cuda_version is the first
// archive's (what old indexes looked like, so tests can prove they are still read).
std::string manifest_to_json(const Manifest& m);
std::string index_to_json(const Index& idx);
// Parsers validate every field; throw Error{Format} naming origin and field. A format version
// this kiln does not read (a manifest's other than kManifestFormat, an index's outside
// kOldestIndexFormat..kIndexFormat) throws Error{Stale} saying "too old" or "too new".
Manifest parse_manifest(std::string_view json_text, const std::string& origin);
Index parse_index(std::string_view json_text, const std::string& origin);
// The index's "provenance" object alone (a build shard carries one too): canonical JSON, and its
// parser (fields named "provenance.<field>" in errors).
std::string provenance_to_json(const Provenance& p);
Provenance parse_provenance(std::string_view json_text, const std::string& origin);

// MAJOR.MINOR.PATCH with an optional -prerelease of [0-9A-Za-z.]: the package_version field,
// and every --version the CLI takes.
bool is_package_version(std::string_view s);

// A kernel package's name: lowercase ASCII letters, digits and '-', each '-'-separated segment
// starting with a letter, at most 64 characters ("kiln-kernels", "acme-scale"); not "kiln" itself
// (kiln-<version>-... names kiln's tarballs). Versions start with a digit, so
// "<name>-<version>-..." splits one way only, and one package's names never start with
// another's ("acme-" + "1.0.0" vs "acme-scale-1.0.0").
inline constexpr std::size_t kMaxPackageNameLength = 64;
inline constexpr const char* kPackageNameRule =
    "expected a package name: lowercase letters, digits and '-', each '-'-separated part "
    "starting with a letter, at most 64 characters, not \"kiln\"";
bool is_package_name(std::string_view s);
// Pure: the package a release file or directory name (or its stem) is for: the '-'-separated
// parts before the first one starting with a digit, when they make a package name and a version
// part follows; nullopt otherwise. Names carry "<package>-<version>-..." (or "<package>-<version>"
// for a stem), so this splits them one way only (manifests/README.md, "Names").
std::optional<std::string_view> release_name_package(std::string_view name);

// The release a file named "<package>-<version><suffix>" belongs to ("-index.json",
// "-SHA256SUMS"): both parts when the name ends with `suffix`, splits by release_name_package
// and the version is a package version; nullopt otherwise.
struct ReleaseOfFile {
  std::string package;
  std::string version;
};
std::optional<ReleaseOfFile> release_of_file_name(std::string_view name, std::string_view suffix);

// Whether `file` names one of release <package> <version>'s files or a temporary of one (what a
// killed writer of the release may leave): "<package>-<version>" followed by '-' or '.'. Used to
// clean up only after the release being written (a dist, a mirror).
bool names_release_file(std::string_view file, std::string_view package, std::string_view version);

// <package>-<version>-cuda<major>.<minor>-<target>.tar.zst
std::string archive_file_name(std::string_view package, std::string_view version,
                              std::string_view cuda, std::string_view target);
// the archive name without ".tar.zst": the directory an archive unpacks to inside a store
std::string archive_stem(std::string_view package, std::string_view version, std::string_view cuda,
                         std::string_view target);
// <package>-<version>-index.json
std::string index_file_name(std::string_view package, std::string_view version);
// <package>-<version>.package.json: the package's description (project/package_description.hpp),
// beside the index in a release and beside the archives in a store.
std::string description_file_name(std::string_view package, std::string_view version);

}  // namespace kiln::format
