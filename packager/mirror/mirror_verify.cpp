// `kiln mirror verify` (mirror.hpp: verify_mirror): every file of a release in a mirror
// directory checked against the checksum file, the index and the pins, and reported one by one.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fetch/fetch_internal.hpp"
#include "format/manifest.hpp"
#include "io/artifact_check.hpp"
#include "kiln/error.hpp"
#include "mirror/mirror.hpp"
#include "mirror/mirror_internal.hpp"
#include "mirror/simple_index.hpp"
#include "store/store.hpp"

namespace kiln::mirror {

namespace fs = std::filesystem;
using namespace detail;

const char* to_string(FileStatus status) {
  switch (status) {
    case FileStatus::Ok:
      return "ok";
    case FileStatus::Missing:
      return "missing";
    case FileStatus::Mismatch:
      return "mismatch";
    case FileStatus::Invalid:
      return "invalid";
    case FileStatus::Unlisted:
      return "unlisted";
    case FileStatus::Uncovered:
      return "uncovered";
  }
  return "invalid";
}

std::optional<ErrorKind> MirrorReport::worst() const {
  std::vector<store::VerifyProblem> all;
  for (const auto& f : files)
    if (f.error) all.push_back({*f.error, f.name, "", ""});
  return store::most_severe(all);
}

std::vector<ReleaseName> releases_to_verify(const fs::path& dir, bool pinned) {
  std::vector<ReleaseName> all = releases_in(dir);
  if (all.empty())
    throw Error(ErrorKind::NotFound,
                "no release in " + dir.string() +
                    ": no <package>-<version>-SHA256SUMS or <package>-<version>-index.json");
  if (all.size() > 1 && pinned) {
    std::string names;
    for (const auto& r : all) names += (names.empty() ? "" : ", ") + r.package + " " + r.version;
    throw Error(ErrorKind::Usage, dir.string() + " holds " + std::to_string(all.size()) +
                                      " releases (" + names +
                                      "): a pin covers one, so name it with --package and "
                                      "--version");
  }
  return all;
}

std::optional<ErrorKind> worst_of(const std::vector<MirrorReport>& reports) {
  std::optional<ErrorKind> worst;
  for (const auto& r : reports)
    if (auto w = r.worst())
      worst = store::most_severe({{*w, "", "", ""}, {worst.value_or(*w), "", "", ""}});
  return worst;
}

namespace {

// Rows of the verify report under construction: every problem of a file is kept; the row's
// status is that of its most severe problem.
class ReportBuilder {
 public:
  void touch(const std::string& name, ReleaseFileKind kind) {
    auto& r = rows_[name];
    r.kind = kind;
  }
  void note(const std::string& name, ReleaseFileKind kind, const std::string& text) {
    touch(name, kind);
    rows_[name].notes.push_back(text);
  }
  void problem(const std::string& name, ReleaseFileKind kind, ErrorKind error, FileStatus status,
               const std::string& detail) {
    touch(name, kind);
    rows_[name].problems.push_back({error, status, detail});
  }
  bool has(const std::string& name) const { return rows_.count(name) != 0; }

  std::vector<MirrorFileReport> finish() const {
    std::vector<MirrorFileReport> out;
    for (const auto& [name, row] : rows_) {
      MirrorFileReport f;
      f.name = name;
      f.kind = row.kind;
      std::vector<store::VerifyProblem> vp;
      for (const auto& p : row.problems) vp.push_back({p.error, name, "", ""});
      f.error = store::most_severe(vp);
      std::string detail;
      if (f.error) {
        for (const auto& p : row.problems) {
          if (p.error == *f.error && f.status == FileStatus::Ok) f.status = p.status;
          detail += (detail.empty() ? "" : "; ") + p.detail;
        }
      } else {
        for (const auto& n : row.notes) detail += (detail.empty() ? "" : "; ") + n;
      }
      f.detail = detail;
      out.push_back(std::move(f));
    }
    return out;
  }

 private:
  struct Problem {
    ErrorKind error;
    FileStatus status;
    std::string detail;
  };
  struct Row {
    ReleaseFileKind kind = ReleaseFileKind::Other;
    std::vector<Problem> problems;
    std::vector<std::string> notes;  // shown when the file is good
  };
  std::map<std::string, Row> rows_;
};

}  // namespace

MirrorReport verify_mirror(const fs::path& dir, const VerifyMirrorOptions& opts) {
  const ReleaseName release = detail::resolved_release(opts.package, opts.version);
  const std::string& package = release.package;
  const std::string& version = release.version;
  const std::string pin = detail::resolved_pin(opts.index_sha256);
  const std::string sums_pin = detail::resolved_pin(opts.sums_sha256, "--sums-sha256");
  // With a pin, "consistent" is not enough: every file must be covered by what was pinned.
  const bool pinned = !pin.empty() || !sums_pin.empty();
  std::error_code ec;
  if (!fs::exists(dir, ec))
    throw Error(ErrorKind::NotFound, "mirror directory " + dir.string() + " does not exist");
  if (!fs::is_directory(dir, ec))
    throw Error(ErrorKind::Usage, dir.string() + " is not a directory");

  MirrorReport report;
  report.dir = dir;
  report.package = package;
  report.version = version;
  ReportBuilder rb;
  const auto present = detail::release_files_in(dir, package, version);
  std::map<std::string, detail::Digest> digests;
  // The digest of a present file, once; nullopt (and a problem reported) when unreadable.
  auto digest = [&](const std::string& name, ReleaseFileKind kind) -> std::optional<detail::Digest> {
    auto it = digests.find(name);
    if (it != digests.end()) return it->second;
    try {
      return digests[name] = digest_of(dir / name);
    } catch (const Error& e) {
      rb.problem(name, kind, e.kind(), FileStatus::Invalid, e.what());
      return std::nullopt;
    }
  };

  // 1. The checksum file.
  const std::string sums_name = checksums_file_name(package, version);
  std::optional<std::map<std::string, std::string>> sums;
  bool sums_trusted = false;  // parsed, and matching --sums-sha256
  if (!present.count(sums_name)) {
    rb.problem(sums_name, ReleaseFileKind::Checksums, ErrorKind::NotFound, FileStatus::Missing,
               "no checksum file: it should list every file of release " + version +
                   " (`kiln mirror stage` writes it); the index and its archives were checked "
                   "without it");
  } else {
    try {
      auto entries =
          parse_checksums(detail::read_capped(dir / sums_name, kMaxChecksumsBytes), sums_name, sums_name);
      sums.emplace();
      for (const auto& e : entries) (*sums)[e.name] = e.sha256;
      rb.note(sums_name, ReleaseFileKind::Checksums,
              std::to_string(entries.size()) + " files listed");
      if (!sums_pin.empty()) {
        if (auto d = digest(sums_name, ReleaseFileKind::Checksums)) {
          sums_trusted = d->sha256 == sums_pin;
          if (!sums_trusted)
            rb.problem(sums_name, ReleaseFileKind::Checksums, ErrorKind::Integrity,
                       FileStatus::Mismatch,
                       "pinned sha256 " + sums_pin + " (--sums-sha256), the file has " + d->sha256 +
                           ": nothing it lists is trusted");
        }
      }
    } catch (const Error& e) {
      rb.problem(sums_name, ReleaseFileKind::Checksums, e.kind(), FileStatus::Invalid, e.what());
    }
  }
  // Why a file that only the checksum file vouches for is not covered (verify with a pin).
  const std::string uncovered_why =
      sums_pin.empty()
          ? "the pinned index covers only itself and its archives, and " + sums_name +
                " is not pinned (--sums-sha256 HEX, the digest `kiln mirror stage` prints)"
          : sums_name + " does not match --sums-sha256";
  // A present file against its SHA256SUMS line (when there is a checksum file).
  auto check_listed = [&](const std::string& name, ReleaseFileKind kind, const Digest& d) {
    if (!sums) return;
    auto it = sums->find(name);
    if (it == sums->end())
      rb.problem(name, kind, ErrorKind::Integrity, FileStatus::Unlisted,
                 "not listed in " + sums_name + " (sha256 " + d.sha256 + ")");
    else if (it->second != d.sha256)
      rb.problem(name, kind, ErrorKind::Integrity, FileStatus::Mismatch,
                 sums_name + " lists sha256 " + it->second + ", the file has " + d.sha256);
  };

  // 2. The index.
  const std::string index_name = format::index_file_name(package, version);
  std::optional<format::Index> idx;
  if (!present.count(index_name)) {
    bool listed = sums && sums->count(index_name);
    rb.problem(
        index_name, ReleaseFileKind::Index, ErrorKind::NotFound, FileStatus::Missing,
        listed ? "listed in " + sums_name + " (sha256 " + sums->at(index_name) + ") but not found"
               : "not found: a release needs its index");
  } else if (auto d = digest(index_name, ReleaseFileKind::Index)) {
    rb.note(index_name, ReleaseFileKind::Index, "sha256 " + d->sha256);
    if (!pin.empty() && d->sha256 != pin)
      rb.problem(index_name, ReleaseFileKind::Index, ErrorKind::Integrity, FileStatus::Mismatch,
                 "pinned sha256 " + pin + " (--index-sha256), the file has " + d->sha256);
    check_listed(index_name, ReleaseFileKind::Index, *d);
    if (pinned && pin.empty() && !sums_trusted)
      rb.problem(index_name, ReleaseFileKind::Index, ErrorKind::Integrity, FileStatus::Uncovered,
                 "not covered by anything pinned: no --index-sha256, and " + uncovered_why);
    try {
      format::Index parsed =
          format::parse_index(detail::read_capped(dir / index_name, fetch::kMaxIndexBytes), index_name);
      if (parsed.package != package)
        rb.problem(index_name, ReleaseFileKind::Index, ErrorKind::Stale, FileStatus::Invalid,
                   "package is " + parsed.package + ", expected " + package);
      else if (parsed.package_version != version)
        rb.problem(index_name, ReleaseFileKind::Index, ErrorKind::Stale, FileStatus::Invalid,
                   "package_version is " + parsed.package_version + ", expected " + version);
      idx = std::move(parsed);
    } catch (const Error& e) {
      rb.problem(index_name, ReleaseFileKind::Index, e.kind(), FileStatus::Invalid, e.what());
    }
  }

  // 3. Every archive the index lists.
  std::set<std::string> in_index;
  if (idx) {
    for (const auto& e : idx->archives) {
      in_index.insert(e.file);
      const auto kind = ReleaseFileKind::Archive;
      if (!detail::is_regular(dir / e.file)) {
        rb.problem(e.file, kind, ErrorKind::NotFound, FileStatus::Missing,
                   "listed in " + index_name + " (" + std::to_string(e.size) + " bytes, sha256 " +
                       e.sha256 + ") but not found");
        continue;
      }
      auto d = digest(e.file, kind);
      if (!d) continue;
      if (d->size != e.size)
        rb.problem(e.file, kind, ErrorKind::Integrity, FileStatus::Mismatch,
                   index_name + " lists " + std::to_string(e.size) + " bytes, the file has " +
                       std::to_string(d->size));
      else if (d->sha256 != e.sha256)
        rb.problem(e.file, kind, ErrorKind::Integrity, FileStatus::Mismatch,
                   index_name + " lists sha256 " + e.sha256 + ", the file has " + d->sha256);
      check_listed(e.file, kind, *d);
      for (const auto& p : detail::check_archive_content(dir / e.file, e, *idx, version, index_name))
        rb.problem(e.file, kind, p.kind, FileStatus::Invalid, p.message);
      rb.note(e.file, kind,
              std::to_string(d->size) + " bytes, sha256 " + d->sha256 +
                  ", manifest and artifacts verified");
    }
  }
  // 3b. The description the index pins (index format 3).
  if (idx && idx->description) {
    const format::IndexFile& f = *idx->description;
    const auto kind = ReleaseFileKind::Description;
    in_index.insert(f.file);
    if (!detail::is_regular(dir / f.file)) {
      rb.problem(f.file, kind, ErrorKind::NotFound, FileStatus::Missing,
                 "pinned by " + index_name + " (" + std::to_string(f.size) + " bytes, sha256 " +
                     f.sha256 + ") but not found");
    } else if (auto d = digest(f.file, kind)) {
      if (auto mm = io::pin_mismatch(d->size, d->sha256, io::ArtifactPin{f.size, f.sha256}))
        rb.problem(f.file, kind, ErrorKind::Integrity, FileStatus::Mismatch,
                   mm->message("", index_name));
      check_listed(f.file, kind, *d);
      rb.note(f.file, kind, std::to_string(d->size) + " bytes, sha256 " + d->sha256);
    }
  }

  // 4. The other files SHA256SUMS lists: wheels, tarballs, archives the index does not list.
  if (sums) {
    for (const auto& [name, sha] : *sums) {
      if (name == index_name || in_index.count(name)) continue;
      const auto kind =
          classify_release_file(name, package, version).value_or(ReleaseFileKind::Other);
      if (!detail::is_regular(dir / name)) {
        rb.problem(name, kind, ErrorKind::NotFound, FileStatus::Missing,
                   "listed in " + sums_name + " (sha256 " + sha + ") but not found");
        continue;
      }
      auto d = digest(name, kind);
      if (!d) continue;
      rb.note(name, kind, "sha256 " + d->sha256);
      check_listed(name, kind, *d);
      if (kind == ReleaseFileKind::Archive && idx)
        rb.problem(name, kind, ErrorKind::Integrity, FileStatus::Unlisted,
                   "an archive of release " + version + " that " + index_name +
                       " does not list: no loader will ever fetch it");
      if (pinned && !sums_trusted)
        rb.problem(name, kind, ErrorKind::Integrity, FileStatus::Uncovered,
                   std::string("not covered by anything pinned (sha256 ") + d->sha256 +
                       " only vouched for by " + sums_name + "): " + uncovered_why);
      if (is_wheel(kind))
        for (const auto& p : check_wheel(dir / name))
          rb.problem(name, kind, ErrorKind::Integrity, FileStatus::Invalid, p);
    }
  }

  // 5. The pip index: the wheels' metadata files and the pages naming them (simple_index.hpp).
  if (sums) {
    std::vector<ChecksumEntry> listed;
    for (const auto& [name, sha] : *sums) listed.push_back({name, sha});
    for (const auto& row : check_simple_index(dir, package, version, listed)) {
      if (row.error)
        rb.problem(row.name, row.kind, *row.error, row.status, row.detail);
      else
        rb.note(row.name, row.kind, row.detail);
    }
  }

  // 6. Files of the release that nothing lists.
  for (const auto& [name, kind] : present) {
    if (rb.has(name)) continue;
    std::optional<detail::Digest> d = digest(name, kind);
    // Without a usable checksum file the root cause is that file, already reported.
    rb.problem(name, kind, sums ? ErrorKind::Integrity : ErrorKind::NotFound, FileStatus::Unlisted,
               std::string("a file of release ") + version + " that " +
                   (sums ? sums_name + " does not list" : "nothing lists (no checksum file)") +
                   (d ? " (sha256 " + d->sha256 + ")" : ""));
    if (is_wheel(kind))
      for (const auto& p : check_wheel(dir / name))
        rb.problem(name, kind, ErrorKind::Integrity, FileStatus::Invalid, p);
  }

  report.files = rb.finish();
  return report;
}

}  // namespace kiln::mirror
