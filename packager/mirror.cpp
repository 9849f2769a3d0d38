// `kiln mirror stage|verify|sync` (mirror.hpp). The state machine of a sync:
//
//   no --index-sha256 and no --sums-sha256       -> Usage, nothing fetched
//   GET <from>/kiln-<ver>-SHA256SUMS (capped)  -> --sums-sha256 (when given), parse strictly
//   GET <from>/kiln-kernels-<ver>-index.json   -> pin (when given) + its SHA256SUMS line,
//                                                 parse, version
//   plan_sync: every SUMS line a file of <ver>, else Format (nothing written); archives agree
//     with the index; wheels/tarballs published only under a pinned SUMS, else withheld
//   for each file to publish: <to>/<name> has the listed digest? -> already good, no transfer
//     else stream into <to>/.kiln-sync-XXXXXX/<name>, hashing; > cap -> abort
//       (download_verified, verified_download.hpp: the verified download and retry loop that
//       kiln fetch and the loader's mirror tier use)
//       digest (and size, archive members, manifest for archives) verified -> next file
//       anything else -> remove the staging dir, throw naming file, URL, expected and got
//   every file verified -> rename into <to>: archives/wheels/tarballs, then the index, then
//   SHA256SUMS; remove the staging dir
#include "mirror.hpp"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "atomic_file.hpp"
#include "fetch_internal.hpp"
#include "http_transport.hpp"
#include "index_entry_check.hpp"
#include "kiln/manifest.hpp"
#include "kiln/sha256.hpp"
#include "kiln/store.hpp"
#include "kiln/version.hpp"
#include "verified_download.hpp"
#include "wheel.hpp"

namespace kiln::packager {

namespace fs = std::filesystem;

namespace {

bool starts_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.compare(0, p.size(), p) == 0;
}
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Reads a whole file, refusing one larger than `cap` (Error{Format}) or unreadable (Error{Io}).
std::string read_capped(const fs::path& p, std::size_t cap) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error(ErrorKind::Io, "cannot open " + p.string());
  std::string data;
  char buf[1 << 15];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    data.append(buf, static_cast<std::size_t>(in.gcount()));
    if (data.size() > cap)
      throw Error(ErrorKind::Format,
                  p.string() + " is larger than " + std::to_string(cap) + " bytes: refused");
  }
  if (in.bad()) throw Error(ErrorKind::Io, "cannot read " + p.string());
  return data;
}

struct Digest {
  std::uint64_t size = 0;
  std::string sha256;
};

Digest digest_of(const fs::path& p) {
  Digest d;
  std::size_t size = 0;
  d.sha256 = sha256_file(p, &size);
  d.size = size;
  return d;
}

bool is_regular(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

std::string resolved_version(const std::string& v) {
  std::string out = v.empty() ? kiln::version() : v;
  check_release_version(out);
  return out;
}

std::string resolved_pin(const std::string& pin, const char* option = "--index-sha256") {
  std::string p = lower(pin);
  if (!p.empty() && !is_sha256_hex(p))
    throw Error(ErrorKind::Usage,
                std::string(option) + " '" + pin + "' is not a SHA-256 digest (64 hex digits)");
  return p;
}

// Names of the files of `version` in `dir` (regular files, not hidden), with their kinds.
std::map<std::string, ReleaseFileKind> release_files_in(const fs::path& dir,
                                                        const std::string& version) {
  std::map<std::string, ReleaseFileKind> out;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) throw Error(ErrorKind::Io, "cannot list " + dir.string() + ": " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) throw Error(ErrorKind::Io, "cannot list " + dir.string() + ": " + ec.message());
    std::string name = it->path().filename().string();
    std::error_code fec;
    if (!it->is_regular_file(fec)) continue;
    if (auto kind = classify_release_file(name, version)) out.emplace(name, *kind);
  }
  return out;
}

// An archive's content against its index entry: members against the manifest, package version,
// and the manifest against the index (the one check, index_entry_check.hpp).
std::vector<VerifyProblem> check_archive_content(const fs::path& path, const IndexEntry& e,
                                                 const Index& idx, const std::string& version,
                                                 const std::string& index_origin) {
  Manifest m;
  std::vector<VerifyProblem> problems = verify_archive_file(path, version, &m);
  if (m.package_version.empty()) return problems;  // manifest unreadable: already reported
  auto against_index = manifest_index_problems(m, e, idx, path.string(), index_origin);
  problems.insert(problems.end(), against_index.begin(), against_index.end());
  return problems;
}

std::string join_problems(const std::vector<VerifyProblem>& problems) {
  std::string out;
  for (const auto& p : problems) out += "\n  " + p.message;
  return out;
}

void fsync_dir(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

// --- the checksum file ---------------------------------------------------------------------

std::string checksums_file_name(std::string_view version) {
  return "kiln-" + std::string(version) + "-SHA256SUMS";
}

bool is_plain_file_name(std::string_view name) {
  if (name.empty() || name[0] == '.') return false;
  for (char c : name) {
    unsigned char u = static_cast<unsigned char>(c);
    // '\' would make sha256sum escape the line; control characters break the line format.
    if (c == '/' || c == '\\' || u < 0x20 || u == 0x7f) return false;
  }
  return true;
}

std::string checksums_to_text(std::vector<ChecksumEntry> entries) {
  std::sort(entries.begin(), entries.end(),
            [](const ChecksumEntry& a, const ChecksumEntry& b) { return a.name < b.name; });
  std::string out;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    if (!is_plain_file_name(e.name) || !is_sha256_hex(e.sha256) ||
        (i > 0 && entries[i - 1].name == e.name))
      throw Error(ErrorKind::Internal, "checksum entry '" + e.name + "' / '" + e.sha256 +
                                           "' does not fit the SHA256SUMS grammar");
    out += e.sha256 + "  " + e.name + "\n";
  }
  return out;
}

std::vector<ChecksumEntry> parse_checksums(std::string_view text, const std::string& origin,
                                           const std::string& self_name) {
  std::vector<ChecksumEntry> out;
  if (!text.empty() && text.back() != '\n')
    throw Error(ErrorKind::Format, origin +
                                       ": the last line does not end with a newline "
                                       "(truncated?)");
  std::size_t line_no = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    ++line_no;
    std::size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    auto bad = [&](const std::string& what) {
      return Error(ErrorKind::Format, origin + ": line " + std::to_string(line_no) + ": " + what +
                                          " (expected '<64 lowercase hex>  <file name>')");
    };
    if (line.size() < 67) throw bad("too short");
    std::string sha(line.substr(0, 64));
    if (!is_sha256_hex(sha)) throw bad("'" + sha + "' is not 64 lowercase hex digits");
    if (!(line[64] == ' ' && (line[65] == ' ' || line[65] == '*')))
      throw bad("the digest must be followed by two spaces (or ' *')");
    std::string name(line.substr(66));
    if (!is_plain_file_name(name))
      throw bad("'" + name +
                "' is not a plain file name (no '/', '\\', control characters or "
                "leading '.')");
    if (name == self_name) throw bad("the checksum file lists itself");
    if (!out.empty() && !(out.back().name < name))
      throw bad(out.back().name == name ? "'" + name + "' is listed twice"
                                        : "'" + name + "' comes after '" + out.back().name +
                                              "': entries must be sorted by name");
    out.push_back({name, sha});
  }
  return out;
}

// --- which files belong to a release ---------------------------------------------------------

const char* to_string(ReleaseFileKind kind) {
  switch (kind) {
    case ReleaseFileKind::Checksums:
      return "checksums";
    case ReleaseFileKind::Index:
      return "index";
    case ReleaseFileKind::Archive:
      return "archive";
    case ReleaseFileKind::Wheel:
      return "wheel";
    case ReleaseFileKind::Tarball:
      return "tarball";
    case ReleaseFileKind::Other:
      return "other";
  }
  return "other";
}

std::optional<ReleaseFileKind> classify_release_file(std::string_view name,
                                                     std::string_view version) {
  if (!is_plain_file_name(name) || version.empty()) return std::nullopt;
  const std::string v(version);
  if (name == checksums_file_name(v)) return ReleaseFileKind::Checksums;
  if (name == index_file_name(v)) return ReleaseFileKind::Index;
  if (starts_with(name, "kiln-kernels-" + v + "-cuda") && ends_with(name, ".tar.zst"))
    return ReleaseFileKind::Archive;
  if (ends_with(name, ".whl")) {
    // {distribution}-{version}(-{build})?-{python}-{abi}-{platform}.whl; the distribution
    // itself holds no '-' (PEP 427 escapes it to '_').
    std::size_t a = name.find('-');
    std::size_t b = a == std::string_view::npos ? a : name.find('-', a + 1);
    if (b == std::string_view::npos) return std::nullopt;
    std::string field(name.substr(a + 1, b - a - 1));
    std::string pep440 = v;
    try {
      pep440 = wheel::pep440_version(v);
    } catch (const Error&) {
      // no PEP 440 spelling: kiln wheel would have refused to write one for this version
    }
    if (field == v || field == pep440) return ReleaseFileKind::Wheel;
    return std::nullopt;
  }
  if (starts_with(name, "kiln-" + v + "-cuda") && ends_with(name, ".tar.zst"))
    return ReleaseFileKind::Tarball;
  if (starts_with(name, "kiln-kernels-" + v + "-") || starts_with(name, "kiln-" + v + "-"))
    return ReleaseFileKind::Other;
  return std::nullopt;
}

void check_release_version(const std::string& version) {
  bool ok = !version.empty() && std::isdigit(static_cast<unsigned char>(version[0]));
  for (char c : version)
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-');
  if (!ok)
    throw Error(ErrorKind::Usage, "'" + version +
                                      "' is not a release version (MAJOR.MINOR.PATCH[-PRERELEASE], "
                                      "e.g. 0.1.0)");
}

std::vector<std::string> check_wheel(const fs::path& path) {
  // The wheel's own RECORD: every member listed once with the right digest and size, and
  // RECORD, WHEEL and METADATA well formed (packager/wheel.hpp).
  std::vector<std::string> out;
  for (const auto& p : wheel::verify_wheel(path)) out.push_back(p.file + ": " + p.what);
  return out;
}

// --- kiln mirror verify ------------------------------------------------------------------------

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
  std::vector<VerifyProblem> all;
  for (const auto& f : files)
    if (f.error) all.push_back({*f.error, f.name, "", ""});
  return most_severe(all);
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
      std::vector<VerifyProblem> vp;
      for (const auto& p : row.problems) vp.push_back({p.error, name, "", ""});
      f.error = most_severe(vp);
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
  const std::string version = resolved_version(opts.version);
  const std::string pin = resolved_pin(opts.index_sha256);
  const std::string sums_pin = resolved_pin(opts.sums_sha256, "--sums-sha256");
  // With a pin, "consistent" is not enough: every file must be covered by what was pinned.
  const bool pinned = !pin.empty() || !sums_pin.empty();
  std::error_code ec;
  if (!fs::exists(dir, ec))
    throw Error(ErrorKind::NotFound, "mirror directory " + dir.string() + " does not exist");
  if (!fs::is_directory(dir, ec))
    throw Error(ErrorKind::Usage, dir.string() + " is not a directory");

  MirrorReport report;
  report.dir = dir;
  report.version = version;
  ReportBuilder rb;
  const auto present = release_files_in(dir, version);
  std::map<std::string, Digest> digests;
  // The digest of a present file, once; nullopt (and a problem reported) when unreadable.
  auto digest = [&](const std::string& name, ReleaseFileKind kind) -> std::optional<Digest> {
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
  const std::string sums_name = checksums_file_name(version);
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
          parse_checksums(read_capped(dir / sums_name, kMaxChecksumsBytes), sums_name, sums_name);
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
  const std::string index_name = index_file_name(version);
  std::optional<Index> idx;
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
      Index parsed =
          parse_index(read_capped(dir / index_name, fetch_detail::kMaxIndexBytes), index_name);
      if (parsed.package_version != version)
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
      if (!is_regular(dir / e.file)) {
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
      for (const auto& p : check_archive_content(dir / e.file, e, *idx, version, index_name))
        rb.problem(e.file, kind, p.kind, FileStatus::Invalid, p.message);
      rb.note(e.file, kind,
              std::to_string(d->size) + " bytes, sha256 " + d->sha256 +
                  ", manifest and artifacts verified");
    }
  }

  // 4. The other files SHA256SUMS lists: wheels, tarballs, archives the index does not list.
  if (sums) {
    for (const auto& [name, sha] : *sums) {
      if (name == index_name || in_index.count(name)) continue;
      const auto kind = classify_release_file(name, version).value_or(ReleaseFileKind::Other);
      if (!is_regular(dir / name)) {
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
      if (kind == ReleaseFileKind::Wheel)
        for (const auto& p : check_wheel(dir / name))
          rb.problem(name, kind, ErrorKind::Integrity, FileStatus::Invalid, p);
    }
  }

  // 5. Files of the release that nothing lists.
  for (const auto& [name, kind] : present) {
    if (rb.has(name)) continue;
    std::optional<Digest> d = digest(name, kind);
    // Without a usable checksum file the root cause is that file, already reported.
    rb.problem(name, kind, sums ? ErrorKind::Integrity : ErrorKind::NotFound, FileStatus::Unlisted,
               std::string("a file of release ") + version + " that " +
                   (sums ? sums_name + " does not list" : "nothing lists (no checksum file)") +
                   (d ? " (sha256 " + d->sha256 + ")" : ""));
    if (kind == ReleaseFileKind::Wheel)
      for (const auto& p : check_wheel(dir / name))
        rb.problem(name, kind, ErrorKind::Integrity, FileStatus::Invalid, p);
  }

  report.files = rb.finish();
  return report;
}

// --- kiln mirror stage -------------------------------------------------------------------------

namespace {

struct Candidate {
  ReleaseFileKind kind = ReleaseFileKind::Other;
  fs::path path;
  Digest digest;
};

// Copies src to dst through a temp file beside dst, hashing; refuses bytes that are not the
// ones verified (the source changed meanwhile).
void copy_verified(const fs::path& src, const fs::path& dst, const std::string& sha256) {
  std::ifstream in(src, std::ios::binary);
  if (!in) throw Error(ErrorKind::Io, "cannot open " + src.string());
  AtomicFile out(dst);
  Sha256 h;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    std::string_view chunk(buf, static_cast<std::size_t>(in.gcount()));
    h.update(chunk);
    out.write(chunk);
  }
  if (in.bad()) throw Error(ErrorKind::Io, "cannot read " + src.string());
  std::string got = h.hex();
  if (got != sha256)
    throw Error(ErrorKind::Integrity, src.string() +
                                          " changed while being staged: verified sha256 " + sha256 +
                                          ", copied " + got + "; nothing was replaced");
  out.commit();
}

int copy_order(ReleaseFileKind k) {
  // The index goes last (before the checksum file): a reader never sees an index whose
  // archives are missing.
  switch (k) {
    case ReleaseFileKind::Archive:
      return 0;
    case ReleaseFileKind::Wheel:
    case ReleaseFileKind::Tarball:
    case ReleaseFileKind::Other:
      return 1;
    case ReleaseFileKind::Index:
      return 2;
    case ReleaseFileKind::Checksums:
      return 3;
  }
  return 1;
}

}  // namespace

StageResult stage_release(const StageOptions& opts) {
  const std::string version = resolved_version(opts.version);
  if (opts.sources.empty()) throw Error(ErrorKind::Usage, "no dist directory to stage from");
  if (opts.to.empty()) throw Error(ErrorKind::Usage, "no mirror directory given (--to)");
  auto log = [&](const std::string& line) {
    if (opts.log) opts.log(line);
  };
  std::string source_list;
  for (const auto& s : opts.sources) source_list += (source_list.empty() ? "" : ", ") + s.string();

  std::vector<VerifyProblem> problems;
  std::map<std::string, Candidate> cand;
  std::map<std::string, fs::path> archives_found;  // first source holding each archive name
  // A name found in two sources must be the same bytes in both.
  auto add_candidate = [&](const std::string& name, ReleaseFileKind kind, const fs::path& p) {
    Digest d = digest_of(p);
    auto it = cand.find(name);
    if (it == cand.end()) {
      cand[name] = {kind, p, d};
    } else if (it->second.digest.sha256 != d.sha256) {
      problems.push_back({ErrorKind::Integrity, p.string(), "sha256",
                          name + ": " + it->second.path.string() + " has sha256 " +
                              it->second.digest.sha256 + ", " + p.string() + " has " + d.sha256});
    }
  };
  for (const auto& src : opts.sources) {
    std::error_code ec;
    if (!fs::is_directory(src, ec))
      throw Error(ErrorKind::NotFound, "dist directory " + src.string() + " does not exist");
    for (const auto& [name, kind] : release_files_in(src, version)) {
      switch (kind) {
        case ReleaseFileKind::Index:
        case ReleaseFileKind::Wheel:
        case ReleaseFileKind::Tarball:
          add_candidate(name, kind, src / name);
          break;
        case ReleaseFileKind::Archive:
          archives_found.emplace(name, src / name);
          break;
        case ReleaseFileKind::Checksums:
        case ReleaseFileKind::Other:
          log("skipping " + (src / name).string() + ": not an index, archive, wheel or tarball");
          break;
      }
    }
  }

  // The index and every archive it lists, verified before anything is copied.
  const std::string index_name = index_file_name(version);
  if (cand.count(index_name)) {
    const fs::path ip = cand[index_name].path;
    Index idx = parse_index(read_capped(ip, fetch_detail::kMaxIndexBytes), ip.string());
    if (idx.package_version != version)
      throw Error(ErrorKind::Stale, ip.string() + ": package_version is " + idx.package_version +
                                        ", expected " + version);
    std::set<std::string> listed;
    for (const auto& e : idx.archives) {
      listed.insert(e.file);
      // Archives live beside their index; another source directory is the fallback.
      fs::path ap = is_regular(ip.parent_path() / e.file) ? ip.parent_path() / e.file
                    : archives_found.count(e.file)        ? archives_found[e.file]
                                                          : fs::path();
      if (ap.empty()) {
        problems.push_back(
            {ErrorKind::NotFound, e.file, "file",
             ip.string() + " lists " + e.file + ", found in none of " + source_list});
        continue;
      }
      Digest d = digest_of(ap);
      if (d.size != e.size)
        problems.push_back({ErrorKind::Integrity, ap.string(), "size",
                            ap.string() + ": size is " + std::to_string(d.size) + " bytes, " +
                                ip.string() + " says " + std::to_string(e.size)});
      else if (d.sha256 != e.sha256)
        problems.push_back(
            {ErrorKind::Integrity, ap.string(), "sha256",
             ap.string() + ": sha256 is " + d.sha256 + ", " + ip.string() + " says " + e.sha256});
      auto inner = check_archive_content(ap, e, idx, version, ip.string());
      problems.insert(problems.end(), inner.begin(), inner.end());
      cand[e.file] = {ReleaseFileKind::Archive, ap, d};
    }
    for (const auto& [name, p] : archives_found)
      if (!listed.count(name))
        log("skipping " + p.string() + ": " + index_name + " does not list it");
  }
  for (const auto& [name, c] : cand)
    if (c.kind == ReleaseFileKind::Wheel)
      for (const auto& p : check_wheel(c.path))
        problems.push_back({ErrorKind::Integrity, c.path.string(), "RECORD", p});
  if (!problems.empty())
    throw Error(*most_severe(problems), "refusing to stage release " + version + " into " +
                                            opts.to.string() + ":" + join_problems(problems));

  // The mirror as it is: what its checksum file lists stays listed if it still matches.
  std::error_code ec;
  fs::create_directories(opts.to, ec);
  if (ec || !fs::is_directory(opts.to, ec))
    throw Error(ErrorKind::Io, "cannot create the mirror directory " + opts.to.string() +
                                   (ec ? ": " + ec.message() : ""));
  const std::string sums_name = checksums_file_name(version);
  const fs::path sums_path = opts.to / sums_name;
  std::vector<ChecksumEntry> previous;
  std::string previous_text;
  if (is_regular(sums_path)) {
    previous_text = read_capped(sums_path, kMaxChecksumsBytes);
    try {
      previous = parse_checksums(previous_text, sums_path.string(), sums_name);
    } catch (const Error& e) {
      throw Error(e.kind(), std::string(e.what()) + "\nFix or remove " + sums_path.string() +
                                " (`kiln mirror verify " + opts.to.string() + "` shows what the " +
                                "mirror holds) and stage again.");
    }
  }
  StageResult result;
  std::vector<ChecksumEntry> entries;
  std::set<std::string> unchanged;
  for (const auto& [name, c] : cand) {
    const fs::path dst = opts.to / name;
    if (fs::exists(dst, ec)) {
      Digest have = digest_of(dst);
      if (have.sha256 != c.digest.sha256) {
        problems.push_back({ErrorKind::Integrity, dst.string(), "sha256",
                            dst.string() + " exists with sha256 " + have.sha256 + "; " +
                                c.path.string() + " has " + c.digest.sha256 +
                                ": refusing to overwrite a published file (remove it first if the "
                                "new one is right)"});
        continue;
      }
      unchanged.insert(name);
    }
    entries.push_back({name, c.digest.sha256});
  }
  for (const auto& e : previous) {
    auto it = cand.find(e.name);
    if (it != cand.end()) {
      if (it->second.digest.sha256 != e.sha256)
        problems.push_back({ErrorKind::Integrity, e.name, "sha256",
                            sums_path.string() + " already lists " + e.name + " with sha256 " +
                                e.sha256 + "; " + it->second.path.string() + " has " +
                                it->second.digest.sha256 +
                                ": a published name never gets other bytes"});
      continue;
    }
    const fs::path p = opts.to / e.name;
    if (!is_regular(p)) {
      problems.push_back({ErrorKind::NotFound, p.string(), "file",
                          sums_path.string() + " lists " + e.name + " (sha256 " + e.sha256 +
                              "), which is not in " + opts.to.string()});
      continue;
    }
    Digest have = digest_of(p);
    if (have.sha256 != e.sha256) {
      problems.push_back({ErrorKind::Integrity, p.string(), "sha256",
                          p.string() + ": sha256 is " + have.sha256 + ", " + sums_path.string() +
                              " lists " + e.sha256});
      continue;
    }
    entries.push_back(e);
    result.carried.push_back(e.name);
  }
  if (!cand.count(index_name) &&
      std::none_of(previous.begin(), previous.end(),
                   [&](const ChecksumEntry& e) { return e.name == index_name; }))
    problems.push_back({ErrorKind::NotFound, index_name, "file",
                        "no " + index_name + " in " + source_list + ", and " + opts.to.string() +
                            " holds none listed in " + sums_name +
                            ": stage the `kiln build --dist` directory of release " + version});
  if (!problems.empty())
    throw Error(*most_severe(problems), "refusing to stage release " + version + " into " +
                                            opts.to.string() + ":" + join_problems(problems) +
                                            "\nNothing was copied.");

  std::vector<std::pair<std::string, const Candidate*>> order;
  for (const auto& [name, c] : cand) order.push_back({name, &c});
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return copy_order(a.second->kind) < copy_order(b.second->kind);
  });
  for (const auto& [name, c] : order) {
    if (unchanged.count(name)) {
      result.unchanged.push_back(name);
      log("unchanged " + name + " (same bytes already in " + opts.to.string() + ")");
      continue;
    }
    log("copying " + c->path.string() + " (" + std::to_string(c->digest.size) + " bytes)");
    copy_verified(c->path, opts.to / name, c->digest.sha256);
    result.copied.push_back(name);
  }
  // The checksum file last: it vouches only for files already in place.
  std::string text = checksums_to_text(entries);
  result.checksums_sha256 = sha256_hex(text);
  if (text != previous_text) {
    write_file_atomically(sums_path, text);
    log("wrote " + sums_path.string() + " (" + std::to_string(entries.size()) + " files)");
  } else {
    log("unchanged " + sums_path.string());
  }
  return result;
}

// --- kiln mirror sync --------------------------------------------------------------------------

SyncPlan plan_sync(const std::vector<ChecksumEntry>& entries, const std::string& sums_text,
                   const Index& index, const std::string& version, bool index_pinned,
                   bool sums_pinned, const std::string& sums_origin) {
  const std::string index_name = index_file_name(version);
  const std::string sums_name = checksums_file_name(version);
  std::map<std::string, const IndexEntry*> archives;
  for (const auto& e : index.archives) archives[e.file] = &e;
  const std::string index_cover = index_pinned
                                      ? "the pinned index digest (--index-sha256)"
                                      : "its line in the pinned " + sums_name + " (--sums-sha256)";
  SyncPlan plan;
  std::set<std::string> listed;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const ChecksumEntry& e = entries[i];
    listed.insert(e.name);
    // parse_checksums refuses empty lines: entry i is line i + 1.
    const auto kind = classify_release_file(e.name, version);
    if (!kind || *kind == ReleaseFileKind::Other || *kind == ReleaseFileKind::Checksums)
      throw Error(ErrorKind::Format,
                  sums_origin + ": line " + std::to_string(i + 1) + ": '" + e.name +
                      "' is not a file of release " + version + " (its index " + index_name +
                      ", an archive, a wheel or a tarball of " + version +
                      "): a sync writes only the files of the release it was asked for; refused");
    if (*kind == ReleaseFileKind::Index) {
      plan.publish.push_back({e.name, *kind, e.sha256, std::nullopt, index_cover});
      continue;
    }
    if (auto a = archives.find(e.name); a != archives.end()) {
      if (a->second->sha256 != e.sha256)
        throw Error(ErrorKind::Integrity, e.name + ": " + sums_origin + " lists sha256 " +
                                              e.sha256 + ", " + index_name + " pins " +
                                              a->second->sha256);
      plan.publish.push_back({e.name, ReleaseFileKind::Archive, e.sha256, a->second->size,
                              index_name + " (size and sha256), trusted through " + index_cover});
      continue;
    }
    if (*kind == ReleaseFileKind::Archive) {
      plan.withheld.push_back({e.name, *kind,
                               "an archive of release " + version + " that " + index_name +
                                   " does not list: no loader fetches it, and nothing pins it"});
      continue;
    }
    // Wheels and tarballs: the index carries no digest for them; only a pinned checksum file.
    if (sums_pinned)
      plan.publish.push_back(
          {e.name, *kind, e.sha256, std::nullopt, "the pinned " + sums_name + " (--sums-sha256)"});
    else
      plan.withheld.push_back(
          {e.name, *kind,
           std::string("a ") + to_string(*kind) + " that nothing you trust covers: " + index_name +
               " pins only archives, and " + sums_name +
               " is not pinned (--sums-sha256 HEX, the digest `kiln mirror stage` prints)"});
  }
  for (const auto& e : index.archives)
    if (!listed.count(e.file))
      throw Error(ErrorKind::Integrity, sums_origin + " does not list " + e.file + ", which " +
                                            index_name + " pins (sha256 " + e.sha256 + ")");
  if (sums_pinned && plan.withheld.empty()) {
    plan.checksums_text = sums_text;
  } else {
    std::vector<ChecksumEntry> published;
    for (const auto& f : plan.publish) published.push_back({f.name, f.sha256});
    plan.checksums_text = checksums_to_text(published);
  }
  return plan;
}

namespace {

using fetch_detail::describe;
using fetch_detail::DownloadExpect;
using fetch_detail::DownloadStatus;
using fetch_detail::RetryDecision;
using fetch_detail::RetryLoop;
using fetch_detail::RetryPolicy;
using fetch_detail::TransferRequest;
using fetch_detail::TransferResult;
using fetch_detail::TransferStatus;

ErrorKind kind_of(const TransferResult& r) {
  if (r.status == TransferStatus::Missing) return ErrorKind::NotFound;
  if (r.status == TransferStatus::Http && (r.http_status == 404 || r.http_status == 410))
    return ErrorKind::NotFound;
  return ErrorKind::Network;
}

// The staging directory inside the destination; removed unless every file was moved out.
class StagingDir {
 public:
  explicit StagingDir(const fs::path& parent) {
    std::string tmpl = (parent / ".kiln-sync-XXXXXX").string();
    if (!::mkdtemp(tmpl.data()))
      throw Error(ErrorKind::Io, "cannot create a staging directory in " + parent.string() + ": " +
                                     std::strerror(errno));
    path_ = tmpl;
  }
  ~StagingDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  StagingDir(const StagingDir&) = delete;
  StagingDir& operator=(const StagingDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

class Syncer {
 public:
  Syncer(const SyncOptions& o, fetch_detail::Transport& t, const std::function<void(long)>& s)
      : opts_(o), transport_(t), sleep_(s) {
    policy_ = RetryPolicy{o.max_retries, o.retry_base_ms, o.retry_cap_ms};
  }

  void log(const std::string& line) const {
    if (opts_.log) opts_.log(line);
  }

  TransferRequest request(const std::string& url) const {
    TransferRequest r;
    r.url = url;
    r.connect_timeout_ms = opts_.connect_timeout_ms;
    r.low_speed_bytes = opts_.low_speed_bytes;
    r.low_speed_seconds = opts_.low_speed_seconds;
    r.ca_bundle = opts_.ca_bundle;
    return r;
  }

  // The one retry loop (verified_download.hpp) for `name` at `url`: a failure that is not
  // retried ends the sync naming the file, the URL and what came; a retry is logged.
  RetryLoop retry_loop(const std::string& name, const std::string& url) const {
    RetryLoop loop;
    loop.transport = &transport_;
    loop.policy = policy_;
    loop.sleep_ms = sleep_;
    loop.on_failure = [this, name, url](const TransferResult& r, const RetryDecision& d, int n) {
      if (!d.retry)
        throw Error(kind_of(r), name + ": " + url + ": " + describe(r) +
                                    (n > 1 ? " (after " + std::to_string(n) + " attempts)" : ""));
      log(name + ": " + url + ": " + describe(r) + ", retrying in " + std::to_string(d.delay_ms) +
          " ms");
    };
    return loop;
  }

  std::string fetch_small(const std::string& name, const std::string& url, std::size_t cap) {
    std::string body;
    bool over = false;
    fetch_detail::get_with_retries(
        retry_loop(name, url), [&] { return request(url); },
        [&] {
          body.clear();
          over = false;
        },
        [&](const char* d, std::size_t n) {
          if (body.size() + n > cap) return !(over = true);
          body.append(d, n);
          return true;
        });
    if (over)
      throw Error(ErrorKind::Integrity, name + ": " + url + ": served more than " +
                                            std::to_string(cap) + " bytes: aborted");
    bytes_downloaded_ += body.size();
    return body;
  }

  // Streams `url` into `dst` through the one verified download. `exact_size`: the size the
  // index lists (archives); otherwise --max-file-bytes bounds it. Throws Integrity naming
  // expected and got on any difference.
  std::uint64_t download(const std::string& name, const std::string& url, const fs::path& dst,
                         const std::string& sha256, std::optional<std::uint64_t> exact_size) {
    std::uint64_t cap = exact_size ? *exact_size : opts_.max_file_bytes;
    auto d = fetch_detail::download_verified(
        retry_loop(name, url), [&] { return request(url); }, dst,
        DownloadExpect{sha256, exact_size, cap});
    switch (d.status) {
      case DownloadStatus::Verified:
        break;
      case DownloadStatus::TooBig:
        throw Error(ErrorKind::Integrity,
                    name + ": " + url + ": served more than " +
                        (exact_size ? "the " + std::to_string(cap) + " bytes the index lists"
                                    : std::to_string(cap) + " bytes (--max-file-bytes)") +
                        ": aborted");
      case DownloadStatus::WriteFailed:
        throw Error(ErrorKind::Io, name + ": " + d.write_error);
      case DownloadStatus::TransferFailed:
        // on_failure threw for every failure that is not retried: not reached.
        throw Error(kind_of(d.transfer), name + ": " + url + ": " + describe(d.transfer));
      case DownloadStatus::SizeMismatch:
        bytes_downloaded_ += d.bytes;
        throw Error(ErrorKind::Integrity, name + ": " + url + ": size mismatch: the index lists " +
                                              std::to_string(*exact_size) + " bytes, served " +
                                              std::to_string(d.bytes));
      case DownloadStatus::DigestMismatch:
        bytes_downloaded_ += d.bytes;
        throw Error(ErrorKind::Integrity, name + ": " + url + ": sha256 mismatch: expected " +
                                              sha256 + ", served " + d.sha256 + " (" +
                                              std::to_string(d.bytes) + " bytes)");
    }
    bytes_downloaded_ += d.bytes;
    return d.bytes;
  }

  std::uint64_t bytes_downloaded() const { return bytes_downloaded_; }

 private:
  const SyncOptions& opts_;
  fetch_detail::Transport& transport_;
  const std::function<void(long)>& sleep_;
  RetryPolicy policy_;
  std::uint64_t bytes_downloaded_ = 0;
};

}  // namespace

SyncResult sync_release_with(const SyncOptions& opts, fetch_detail::Transport& transport,
                             const std::function<void(long ms)>& sleep_ms) {
  const std::string version = resolved_version(opts.version);
  const std::string pin = resolved_pin(opts.index_sha256);
  const std::string sums_pin = resolved_pin(opts.sums_sha256, "--sums-sha256");
  if (opts.from.empty()) throw Error(ErrorKind::Usage, "no upstream mirror given (--from)");
  if (opts.to.empty()) throw Error(ErrorKind::Usage, "no destination directory given (--to)");
  if (pin.empty() && sums_pin.empty())
    throw Error(ErrorKind::Usage,
                "no pin: give --index-sha256 (or KILN_INDEX_SHA256; covers the index and its "
                "archives) and/or --sums-sha256 (covers every file the checksum file lists, "
                "wheels and tarballs included). A mirror publishes nothing that is not covered "
                "by a digest you trust.");
  const std::string base = fetch_detail::normalise_mirror(opts.from);
  const fs::path to = opts.to;
  Syncer sx(opts, transport, sleep_ms);

  // 1. The checksum file, then the index it lists.
  const std::string sums_name = checksums_file_name(version);
  const std::string sums_url = base + "/" + sums_name;
  sx.log("fetching " + sums_url);
  const std::string sums_text = sx.fetch_small(sums_name, sums_url, kMaxChecksumsBytes);
  const std::string sums_sha = sha256_hex(sums_text);
  if (!sums_pin.empty() && sums_sha != sums_pin)
    throw Error(ErrorKind::Integrity, sums_name + ": " + sums_url + ": sha256 mismatch: pinned " +
                                          sums_pin + " (--sums-sha256), served " + sums_sha +
                                          "\nNothing was written to " + to.string() + ".");
  const auto entries = parse_checksums(sums_text, sums_url, sums_name);
  std::map<std::string, std::string> listed;
  for (const auto& e : entries) listed[e.name] = e.sha256;

  const std::string index_name = index_file_name(version);
  const std::string index_url = base + "/" + index_name;
  if (!listed.count(index_name))
    throw Error(ErrorKind::Format,
                sums_url + " does not list " + index_name + ": not the checksum file of a release");
  sx.log("fetching " + index_url);
  const std::string index_text =
      sx.fetch_small(index_name, index_url, fetch_detail::kMaxIndexBytes);
  const std::string index_sha = sha256_hex(index_text);
  if (!pin.empty() && index_sha != pin)
    throw Error(ErrorKind::Integrity, index_name + ": " + index_url + ": sha256 mismatch: pinned " +
                                          pin + ", served " + index_sha);
  if (index_sha != listed[index_name])
    throw Error(ErrorKind::Integrity, index_name + ": " + index_url +
                                          ": sha256 mismatch: " + sums_name + " lists " +
                                          listed[index_name] + ", served " + index_sha);
  const Index idx = parse_index(index_text, index_url);
  if (idx.package_version != version)
    throw Error(ErrorKind::Stale, index_url + ": package_version is " + idx.package_version +
                                      ", expected " + version);
  std::map<std::string, const IndexEntry*> archives;
  for (const auto& e : idx.archives) archives[e.file] = &e;
  SyncPlan plan;
  try {
    plan = plan_sync(entries, sums_text, idx, version, !pin.empty(), !sums_pin.empty(), sums_url);
  } catch (const Error& e) {
    throw Error(e.kind(), std::string(e.what()) + "\nNothing was written to " + to.string() + ".");
  }
  listed.clear();
  std::map<std::string, std::string> covered_by;
  for (const auto& f : plan.publish) {
    listed[f.name] = f.sha256;
    covered_by[f.name] = f.covered_by;
  }

  // 2. What the destination already holds with the listed digest needs no transfer.
  SyncResult result;
  result.withheld = plan.withheld;
  for (const auto& w : plan.withheld)
    sx.log("not published: " + w.name + " (" + to_string(w.kind) + "): " + w.reason);
  const std::string& sums_out = plan.checksums_text;
  std::vector<std::string> todo;
  auto already_good = [&](const std::string& name, const std::string& sha) {
    if (!is_regular(to / name)) return false;
    try {
      return digest_of(to / name).sha256 == sha;
    } catch (const Error&) {
      return false;  // unreadable: replaced below, or the rename fails loudly
    }
  };
  for (const auto& f : plan.publish) {
    if (already_good(f.name, f.sha256)) {
      result.already_good.push_back(f.name);
      sx.log("already good " + f.name);
    } else {
      todo.push_back(f.name);
    }
  }
  if (already_good(sums_name, sha256_hex(sums_out)))
    result.already_good.push_back(sums_name);
  else
    todo.push_back(sums_name);
  auto rank = [&](const std::string& n) { return n == sums_name ? 2 : n == index_name ? 1 : 0; };
  std::stable_sort(todo.begin(), todo.end(),
                   [&](const std::string& a, const std::string& b) { return rank(a) < rank(b); });
  if (todo.empty()) {
    sx.log("0 files transferred, " + std::to_string(result.already_good.size()) + " already good");
    result.bytes_downloaded = sx.bytes_downloaded();
    return result;
  }

  // 3. Download and verify everything into a staging directory; 4. rename into place.
  std::error_code ec;
  const bool created_to = !fs::exists(to, ec);
  fs::create_directories(to, ec);
  if (ec || !fs::is_directory(to, ec) || ::access(to.c_str(), W_OK) != 0)
    throw Error(ErrorKind::Io,
                to.string() + " is not a writable directory" + (ec ? ": " + ec.message() : ""));
  bool committing = false;
  try {
    StagingDir staging(to);
    std::uint64_t bytes = 0;
    for (const auto& name : todo) {
      const fs::path staged = staging.path() / name;
      if (name == sums_name || name == index_name) {
        // Already fetched and verified above: the very bytes that were checked.
        write_file_atomically(staged, name == sums_name ? sums_out : index_text);
        bytes += name == sums_name ? sums_out.size() : index_text.size();
        continue;
      }
      const std::string url = base + "/" + name;
      auto arch = archives.find(name);
      std::optional<std::uint64_t> size;
      if (arch != archives.end()) size = arch->second->size;
      sx.log("downloading " + url + (size ? " (" + std::to_string(*size) + " bytes)" : ""));
      bytes += sx.download(name, url, staged, listed[name], size);
      std::vector<VerifyProblem> problems;
      const auto kind = classify_release_file(name, version).value_or(ReleaseFileKind::Other);
      if (arch != archives.end())
        problems = check_archive_content(staged, *arch->second, idx, version, index_url);
      if (kind == ReleaseFileKind::Wheel)
        for (const auto& p : check_wheel(staged))
          problems.push_back({ErrorKind::Integrity, name, "RECORD", p});
      if (!problems.empty())
        throw Error(*most_severe(problems),
                    name + ": " + url +
                        ": digest matches but the content is wrong:" + join_problems(problems));
      sx.log("verified " + name + " (covered by " + covered_by[name] + ")");
    }
    // Every file verified: archives, wheels and tarballs first, then the index, then the
    // checksum file, so a reader never sees an index whose archives are missing.
    committing = true;
    for (const auto& name : todo) {
      if (::rename((staging.path() / name).c_str(), (to / name).c_str()) != 0)
        throw Error(ErrorKind::Io, "cannot rename " + (staging.path() / name).string() + " to " +
                                       (to / name).string() + ": " + std::strerror(errno));
    }
    fsync_dir(to);
    result.transferred = todo;
    result.bytes_transferred = bytes;
  } catch (const Error& e) {
    if (created_to) fs::remove(to, ec);  // only if still empty
    throw Error(e.kind(), std::string(e.what()) +
                              (committing ? "\nFiles renamed before this one are in place and "
                                            "verified; the index and checksum file come last."
                                          : "\nNothing was changed in " + to.string() +
                                                " (staged downloads removed)."));
  }
  result.bytes_downloaded = sx.bytes_downloaded();
  sx.log(std::to_string(result.transferred.size()) + " files transferred, " +
         std::to_string(result.already_good.size()) + " already good");
  return result;
}

SyncResult sync_release(const SyncOptions& opts) {
  auto transport = fetch_detail::make_curl_transport();
  std::function<void(long)> sleep_ms = [](long ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  };
  return sync_release_with(opts, *transport, sleep_ms);
}

}  // namespace kiln::packager
