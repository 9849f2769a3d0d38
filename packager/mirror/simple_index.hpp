#pragma once
// The mirror as a pip index: a PEP 503 simple repository under <mirror>/simple/, with the PEP 691
// JSON form beside each HTML page and a PEP 658 metadata file beside each wheel, made from the
// wheels the mirror's checksum files list (docs/mirrors.md, "The mirror as a pip index"):
//
//   <mirror>/simple/index.html              PEP 503 root page: one link per project, "<project>/"
//   <mirror>/simple/index.json              the same as application/vnd.pypi.simple.v1+json
//   <mirror>/simple/<project>/index.html    one link per wheel: "../../<wheel>#sha256=<hex>",
//                                           data-requires-python, data-dist-info-metadata and
//                                           data-core-metadata ("sha256=<hex of the .metadata>")
//   <mirror>/simple/<project>/index.json    the same files, PEP 691 (api-version 1.0)
//   <mirror>/<wheel>.metadata               the wheel's .dist-info/METADATA, byte for byte
//
// <project> is the wheel's distribution name, PEP 503 normalised (kiln, kiln-kernels,
// kiln-kernels-cu13-sm90a). A static server serves the HTML for ".../simple/<project>/" through
// its index file (index.html); pip reads it. The JSON is served where the server negotiates it
// (docs/decisions.md, "The pip index is static HTML, JSON beside it"). Pages depend only on the
// wheels: projects and files sorted by name (bytes), no timestamps.
//
// The pages and the .metadata files are derived: no checksum file lists them. Stage and sync
// rewrite them after the release's files are in place and before its checksum file (metadata
// files first, project pages next, the root page last, each atomically, only when its bytes
// change), so a page never names a file that is not there yet, and a release whose checksum file
// is there has its pages.
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mirror/mirror.hpp"

namespace kiln::mirror {

// One wheel as the index lists it.
struct IndexedWheel {
  std::string file;      // the wheel's file name
  std::string sha256;    // of the wheel
  std::string metadata;  // its .dist-info/METADATA bytes (the PEP 658 file)
};

struct SimplePage {
  std::string path;  // relative to the mirror, '/'-separated: "simple/index.html"
  std::string bytes;
};

// "kiln-kernels-cu13-sm90a" for "kiln_kernels_cu13_sm90a-0.1.0-py3-none-any.whl": the wheel
// name's distribution field, PEP 503 normalised (lowercase, each run of '-', '_', '.' one '-').
std::string simple_project_name(std::string_view wheel_file);

// Every page for `wheels` (pure): the root's HTML and JSON, then each project's, projects in
// name order. Attribute values and text are HTML-escaped, hrefs percent-encoded; a wheel's
// Requires-Python (from its METADATA) becomes data-requires-python / "requires-python".
std::vector<SimplePage> simple_index_pages(const std::vector<IndexedWheel>& wheels);

// The .dist-info/METADATA of a wheel (the directory named after the file name). Throws
// Error{NotFound}/Format for an unreadable wheel or one without it.
std::string wheel_metadata(const std::filesystem::path& wheel);

// The release a stage or sync is writing: its checksum file's entries, about to be written.
struct FreshRelease {
  ReleaseName release;
  std::vector<ChecksumEntry> listed;
};

// The wheels a mirror directory offers: of every release in it (releases_in), each wheel its
// checksum file lists that is present, with the listed digest; for `fresh`, the entries given
// instead of its file. Its metadata is read from the wheel for wheels of `fresh` and for a wheel
// without its .metadata file; otherwise from that file (`kiln mirror verify` checks it against
// the wheel). A release whose checksum file is unreadable offers none; a wheel of another release
// whose metadata cannot be read is left out (verify reports it); one of `fresh` throws.
std::vector<IndexedWheel> mirror_wheels(const std::filesystem::path& mirror,
                                        const std::optional<FreshRelease>& fresh);

struct SimpleIndexResult {
  std::vector<std::string> written;  // paths (relative) whose bytes changed
  std::size_t projects = 0;
  std::size_t wheels = 0;
};

// Writes the .metadata files, then the project pages, then the root pages, for mirror_wheels.
// Called by stage and sync while they hold the mirror's lock, before the fresh release's checksum
// file. Throws Error{Io}.
SimpleIndexResult write_simple_index(const std::filesystem::path& mirror,
                                     const std::optional<FreshRelease>& fresh);

// `kiln mirror verify`'s rows for the pip index of one release (mirror_verify.cpp adds them to
// the release's report): each listed wheel's .metadata (present, equal to the wheel's METADATA),
// and each page naming the release's projects (present, parses; every link to a wheel of the
// release carries the file's sha256 and its metadata file's; every file it links is there).
// `listed`: the release's checksum file (name -> sha256).
struct IndexRow {
  std::string name;
  ReleaseFileKind kind = ReleaseFileKind::SimplePage;
  std::optional<ErrorKind> error;  // unset: ok (detail is a note)
  FileStatus status = FileStatus::Ok;
  std::string detail;
};
std::vector<IndexRow> check_simple_index(const std::filesystem::path& mirror,
                                         const std::string& package, const std::string& version,
                                         const std::vector<ChecksumEntry>& listed);

}  // namespace kiln::mirror
