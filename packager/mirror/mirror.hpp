#pragma once
// `kiln mirror stage|verify|sync`: the mirror operator's side of a release. A mirror is a flat
// directory on a static file server (no listings); each release in it is described by one
// checksum file, so a mirror can be verified and copied without listing anything:
//
//   <pkg>-<ver>-SHA256SUMS := { SHA256 "  " NAME "\n" }    sorted by NAME (bytes), NAME unique
//   SHA256                 := 64 lowercase hex digits
//   NAME                   := a plain file name: no '/', no '\', no control characters, not
//                             starting with '.', not the checksum file itself
//
// It lists every file of the release (the index, the archives, wheels, tarballs), in the text
// format `sha256sum` writes and `sha256sum -c` reads (" *" before NAME, the binary marker, is
// accepted too). Written down in manifests/README.md ("Mirror layout") and docs/mirrors.md.
//
// Trust: the checksum file is a listing, not a trust anchor. What an operator trusts is a pinned
// index digest (it covers the index and the archives it lists, size and digest) and, for wheels
// and tarballs, which the index does not list, a pinned digest of the checksum file itself
// (--sums-sha256). `sync` publishes only files one of these covers; `verify` with a pin reports
// the others as uncovered (docs/decisions.md, "Wheels and tarballs are trusted through a pinned
// checksum file").
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "format/manifest.hpp"
#include "kiln/error.hpp"

namespace kiln::transport {
class Transport;
}

namespace kiln::mirror {

// --- the checksum file ---------------------------------------------------------------------

struct ChecksumEntry {
  std::string name;
  std::string sha256;
  bool operator==(const ChecksumEntry& o) const { return name == o.name && sha256 == o.sha256; }
};

// <package>-<version>-SHA256SUMS
std::string checksums_file_name(std::string_view package, std::string_view version);
// The largest checksum file accepted: an upstream streaming garbage is cut off here.
constexpr std::size_t kMaxChecksumsBytes = 1u << 20;

// Canonical text: entries sorted by name, two spaces, one line each. Throws Error{Internal} on
// a name or digest the grammar does not allow (a bug in the caller).
std::string checksums_to_text(std::vector<ChecksumEntry> entries);
// Strict parser: every line as in the grammar, sorted, unique, newline-terminated, not listing
// `self_name`. Throws Error{Format} naming `origin`, the line number and what is wrong.
std::vector<ChecksumEntry> parse_checksums(std::string_view text, const std::string& origin,
                                           const std::string& self_name);
bool is_plain_file_name(std::string_view name);

// --- which files belong to a release ---------------------------------------------------------

enum class ReleaseFileKind {
  Checksums,
  Index,
  Description,
  Archive,
  Wheel,
  PackageWheel,
  RuntimeWheel,
  Tarball,
  WheelMetadata,  // <wheel>.metadata: the PEP 658 file of a wheel of the release (simple_index.hpp)
  SimplePage,     // simple/...: a page of the pip index (simple_index.hpp); never a file name
  Other
};
const char* to_string(ReleaseFileKind kind);
// Wheel, PackageWheel or RuntimeWheel: covered by the checksum file and checked by check_wheel.
bool is_wheel(ReleaseFileKind kind);

// The kind of `name` when it is a file of release `version` of `package`, decided from the name
// alone (several packages share a mirror; one's files are never another's):
//   Checksums  <pkg>-<ver>-SHA256SUMS
//   Index      <pkg>-<ver>-index.json
//   Archive    <pkg>-<ver>-cuda*.tar.zst
//   Wheel      <dist>-<ver>-*.whl: <dist> is <pkg> with '-' as '_' then "_cu<digits>_" (the
//              package's target wheels), <ver> the version or its PEP 440 spelling
//              (0.1.0-rc1 -> 0.1.0rc1)
//   PackageWheel  exactly <pkg with '_'>-<PEP 440 ver>-py3-none-any.whl, the package's own wheel
//              (acme's is acme-1.0.0-..., never acme_kernels-1.0.0-...)
//   RuntimeWheel  kiln-<PEP 440 ver>-*.whl, for the reference package kiln-kernels only (the
//              kiln runtime distribution of the same version, docs/wheels.md)
//   Tarball    kiln-<ver>-cuda*.tar.zst, for the reference package kiln-kernels only (kiln's own
//              install tree, as `kiln tarball` names it; kiln-<ver>-rc1-cuda... is not one of
//              <ver>)
//   WheelMetadata  <a wheel of the release>.metadata: derived from the wheel, listed by no
//              checksum file (simple_index.hpp)
//   Other      any other name starting with <pkg>-<ver>- (or kiln-<ver>- for kiln-kernels),
//              which includes files of a release <ver>-<prerelease>: `mirror sync` refuses to
//              write Other
// nullopt: not a file of this release (another package or version, hidden, unrelated).
std::optional<ReleaseFileKind> classify_release_file(std::string_view name,
                                                     std::string_view package,
                                                     std::string_view version);

// Throws Error{Usage} unless `version` can go into file names (MAJOR.MINOR.PATCH[-PRERELEASE]).
void check_release_version(const std::string& version);

// A wheel's own content check, on top of its SHA256SUMS digest: kiln::wheel::verify_wheel
// (every member listed in RECORD with its digest and size, RECORD/WHEEL/METADATA well formed).
// Each string is one problem, "<wheel>[:<member>]: <sentence>"; empty when the wheel is good.
std::vector<std::string> check_wheel(const std::filesystem::path& path);

// --- kiln mirror verify ------------------------------------------------------------------------

enum class FileStatus {
  Ok,
  Missing,    // listed (checksum file or index) but not in the directory
  Mismatch,   // size or digest differs from what lists it
  Invalid,    // present but its content is wrong (unparsable, stale, archive members)
  Unlisted,   // a file of the release that nothing lists
  Uncovered,  // listed and consistent, but nothing the operator pinned covers it (verify with a
              // pin)
};
const char* to_string(FileStatus status);

struct MirrorFileReport {
  std::string name;
  ReleaseFileKind kind = ReleaseFileKind::Other;
  FileStatus status = FileStatus::Ok;
  std::optional<ErrorKind> error;  // the most severe kind among its problems; unset when ok
  std::string detail;              // what was expected and what was found; "; "-joined
};

struct MirrorReport {
  std::filesystem::path dir;
  std::string package;
  std::string version;
  std::vector<MirrorFileReport> files;  // sorted by name
  std::optional<ErrorKind> worst() const;
  bool ok() const { return !worst().has_value(); }
};

// Every mirror command acts on one release of one package: `package` and `version` are both
// required (Error{Usage}); the CLI fills them from the project or --package/--version.
struct VerifyMirrorOptions {
  std::string package;
  std::string version;
  std::string index_sha256;  // empty: the index is checked against SHA256SUMS only
  std::string sums_sha256;   // pin for kiln-<ver>-SHA256SUMS; covers wheels and tarballs
  // With either pin, every file must be covered by a pin (Uncovered otherwise); with none the
  // mirror is checked for consistency only.
};

// One release of one package, as mirror file names carry it.
struct ReleaseName {
  std::string package;
  std::string version;
};

// The releases whose files are in `dir`: each <package>-<version>-SHA256SUMS or
// <package>-<version>-index.json names one. Sorted by package, then version; each once. Throws
// Error{NotFound} when `dir` does not exist, Error{Io} when it cannot be listed.
std::vector<ReleaseName> releases_in(const std::filesystem::path& dir);

// The releases `kiln mirror stage` stages when none is named: each whose index is in one of
// `sources`, and each the mirror `to` already holds (releases_in) of which a source has a file
// (wheels built later join their release). Sorted, each once; Error{NotFound} naming the sources
// and `to` when there are none.
std::vector<ReleaseName> releases_to_stage(const std::vector<std::filesystem::path>& sources,
                                           const std::filesystem::path& to);

// The releases `kiln mirror verify` checks when none is named: every release in `dir`
// (releases_in). Error{NotFound} when there is none; Error{Usage} naming them when there are
// several and `pinned` (--index-sha256 or --sums-sha256: a pin covers one release).
std::vector<ReleaseName> releases_to_verify(const std::filesystem::path& dir, bool pinned);

// The most severe problem of all the reports (MirrorReport::worst of each); nullopt when all ok.
std::optional<ErrorKind> worst_of(const std::vector<MirrorReport>& reports);

// Checks every file of the release in `dir` and reports each one, good or bad: nothing stops
// at the first problem. Throws only when `dir` is not a readable directory (NotFound / Io) or
// the options are bad (Usage).
MirrorReport verify_mirror(const std::filesystem::path& dir, const VerifyMirrorOptions& opts);

// --- kiln mirror stage -------------------------------------------------------------------------

struct StageOptions {
  std::vector<std::filesystem::path> sources;  // dist directories, searched in order
  std::filesystem::path to;                    // the mirror directory (created if missing)
  std::string package;
  std::string version;
  std::function<void(const std::string&)> log;
};

struct StageResult {
  std::vector<std::string> copied;     // names copied into the mirror by this call
  std::vector<std::string> unchanged;  // names already there with the same bytes
  std::vector<std::string> carried;    // listed by the mirror's previous checksum file, kept
  std::string checksums_sha256;        // digest of the checksum file written
  // The pip index's files this call wrote (simple_index.hpp), relative to the mirror: the
  // .metadata files and pages whose bytes changed.
  std::vector<std::string> index_written;
};

// Verifies the release found in the sources (index, every archive it lists: size, digest,
// members, manifest against the index; wheels through check_wheel), then copies it into `to`
// and writes the checksum file atomically, last. A file of the same name and other bytes in
// `to` (or in two sources) is refused with Error{Integrity} naming both digests, before anything
// is copied. Files the mirror's previous checksum file listed stay listed when they still
// match it. No index in the sources: the mirror's own (listed in its checksum file) is used.
// The mirror's pip index is rewritten before the checksum file (write_simple_index,
// simple_index.hpp).
StageResult stage_release(const StageOptions& opts);

// --- kiln mirror sync --------------------------------------------------------------------------

// What a sync may publish, decided from the upstream's checksum file and its index once the
// index is trusted (pure; sync_release_with does the I/O).
struct PlannedFile {
  std::string name;
  ReleaseFileKind kind = ReleaseFileKind::Other;
  std::string sha256;
  std::optional<std::uint64_t> size;  // archives: the size the index lists
  std::string covered_by;             // what the operator trusts that pins these bytes
};
struct WithheldFile {
  std::string name;
  ReleaseFileKind kind = ReleaseFileKind::Other;
  std::string reason;  // why nothing trusted covers it
  bool operator==(const WithheldFile& o) const {
    return name == o.name && kind == o.kind && reason == o.reason;
  }
};
struct SyncPlan {
  std::vector<PlannedFile> publish;    // the index, the archives, and what a pinned SUMS covers
  std::vector<WithheldFile> withheld;  // listed upstream, consistent, but covered by nothing
  // The checksum file to write: the upstream's own bytes when it is pinned and nothing is
  // withheld, else the canonical text of `publish` (it then lists only what was published).
  std::string checksums_text;
};

// `entries`: the upstream checksum file (already parsed; `sums_text` its bytes, `sums_pinned`
// whether they matched --sums-sha256), `index`: the index, already matched against a pin or a
// pinned checksum file line; `index_pinned`: --index-sha256 was given. Throws Error{Format} naming
// `sums_origin`, the line and the file for a line that is not a file of release `version` (its
// index, an archive, a wheel or a tarball of `version`: another release's files, index.html, ...),
// and Error{Integrity} when the index and the checksum file disagree about an archive.
SyncPlan plan_sync(const std::vector<ChecksumEntry>& entries, const std::string& sums_text,
                   const format::Index& index, const std::string& package, const std::string& version,
                   bool index_pinned, bool sums_pinned, const std::string& sums_origin);

struct SyncOptions {
  std::string from;          // upstream mirror: http://, https://, file:// or an absolute dir
  std::filesystem::path to;  // local mirror directory (created if missing)
  std::string package;
  std::string version;
  std::string index_sha256;  // pin for the index (covers it and its archives)
  std::string sums_sha256;   // pin for the checksum file (covers every file it lists)
  // At least one pin is required (Error{Usage} otherwise): nothing unpinned is published.
  std::string ca_bundle;  // PEM for https; empty: the system store
  long connect_timeout_ms = 5000;
  long low_speed_bytes = 1024;
  long low_speed_seconds = 10;
  int max_retries = 3;
  long retry_base_ms = 500;
  long retry_cap_ms = 30000;
  // Wheels and tarballs have no size in any listing: a transfer above this is cut off.
  std::uint64_t max_file_bytes = std::uint64_t{16} << 30;
  std::function<void(const std::string&)> log;  // progress, one line per file
  // The bytes of each download as they arrive: the file, its bytes so far (of this attempt) and
  // its size when a listing gives it (archives; not wheels and tarballs). Empty: not reported.
  std::function<void(const std::string& file, std::uint64_t received,
                     std::optional<std::uint64_t> size)>
      progress;
};

struct SyncResult {
  std::vector<std::string> transferred;   // names downloaded and renamed into `to`
  std::vector<std::string> already_good;  // names `to` already held with the listed digest
  std::vector<WithheldFile> withheld;     // listed upstream, not published: nothing trusted covers
  std::uint64_t bytes_transferred = 0;    // bytes of the files in `transferred`
  std::uint64_t bytes_downloaded = 0;     // every byte received, the checksum file included
  std::vector<std::string> index_written;  // the pip index's files written (simple_index.hpp)
};

// Copies a release from an upstream mirror, all or nothing: files are downloaded into
// `<to>/.kiln-sync-<package>-<version>-XXXXXX/`, hashed while streaming, verified, and renamed into
// `to` only when every one of them verified (the index and the checksum file last). Any failure
// removes the staging directory and leaves `to` as it was; the Error names the file, the URL, what
// was expected and what came. Only the files plan_sync publishes are written (and the checksum file
// it gives); the withheld ones are logged and returned. Kinds: NotFound (404, missing file://),
// Network (transfer failures after retries), Integrity (digest, size, pin), Format (checksum
// file, a line that is not a file of the release, index, archive), Stale (index of another
// release), Io (destination), Usage (bad options, no pin).
SyncResult sync_release(const SyncOptions& opts);
// The same over a given transport and sleep (tests).
SyncResult sync_release_with(const SyncOptions& opts, transport::Transport& transport,
                             const std::function<void(long ms)>& sleep_ms);

}  // namespace kiln::mirror
