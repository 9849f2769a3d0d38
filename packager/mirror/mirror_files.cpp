// A release's files (mirror.hpp): the checksum file's grammar, which names belong to a release,
// the release version rule and a wheel's own check; and the helpers the other mirror files share
// (mirror_internal.hpp): reading and hashing a release's files, resolving --version and pins,
// an archive's content against its index entry.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "format/manifest.hpp"
#include "io/atomic_file.hpp"
#include "io/limits.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "kiln/kernels.h"
#include "kiln/version.hpp"
#include "mirror/mirror.hpp"
#include "mirror/mirror_internal.hpp"
#include "store/index_entry_check.hpp"
#include "store/store.hpp"
#include "wheel/wheel.hpp"

namespace kiln::mirror {

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

}  // namespace

// --- the checksum file ---------------------------------------------------------------------

std::string checksums_file_name(std::string_view package, std::string_view version) {
  return std::string(package) + "-" + std::string(version) + "-SHA256SUMS";
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
    if (!is_plain_file_name(e.name) || !io::is_sha256_hex(e.sha256) ||
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
    if (!io::is_sha256_hex(sha)) throw bad("'" + sha + "' is not 64 lowercase hex digits");
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
    case ReleaseFileKind::Description:
      return "description";
    case ReleaseFileKind::Archive:
      return "archive";
    case ReleaseFileKind::Wheel:
      return "wheel";
    case ReleaseFileKind::PackageWheel:
      return "package-wheel";
    case ReleaseFileKind::RuntimeWheel:
      return "runtime-wheel";
    case ReleaseFileKind::Tarball:
      return "tarball";
    case ReleaseFileKind::WheelMetadata:
      return "wheel-metadata";
    case ReleaseFileKind::SimplePage:
      return "simple-page";
    case ReleaseFileKind::Other:
      return "other";
  }
  return "other";
}

bool is_wheel(ReleaseFileKind kind) {
  return kind == ReleaseFileKind::Wheel || kind == ReleaseFileKind::PackageWheel ||
         kind == ReleaseFileKind::RuntimeWheel;
}

std::optional<ReleaseFileKind> classify_release_file(std::string_view name,
                                                     std::string_view package,
                                                     std::string_view version) {
  if (!is_plain_file_name(name) || version.empty() || package.empty()) return std::nullopt;
  const std::string v(version), p(package);
  const bool reference = p == KILN_KERNELS_PACKAGE_NAME;
  if (name == checksums_file_name(p, v)) return ReleaseFileKind::Checksums;
  if (name == format::index_file_name(p, v)) return ReleaseFileKind::Index;
  if (name == format::description_file_name(p, v)) return ReleaseFileKind::Description;
  if (starts_with(name, p + "-" + v + "-cuda") && ends_with(name, ".tar.zst"))
    return ReleaseFileKind::Archive;
  if (ends_with(name, ".whl.metadata")) {
    auto wheel = classify_release_file(name.substr(0, name.size() - 9), package, version);
    if (wheel && is_wheel(*wheel)) return ReleaseFileKind::WheelMetadata;
  }
  if (ends_with(name, ".whl")) {
    std::optional<std::string> pep440;
    try {
      pep440 = wheel::pep440_version(v);
    } catch (const Error&) {
      // no PEP 440 spelling: kiln wheel would have refused to write one for this version
    }
    // Exact names: a package named acme never takes acme-kernels' own wheel.
    if (pep440 && name == wheel::package_wheel_file_name(p, v))
      return ReleaseFileKind::PackageWheel;
    if (pep440 && reference && starts_with(name, "kiln-" + *pep440 + "-"))
      return ReleaseFileKind::RuntimeWheel;
    std::string dist = p;
    std::replace(dist.begin(), dist.end(), '-', '_');
    // <dist>_cu<digits>_<sm|compute><digits>[a|f]-: "acme_cutlass_cu13_..." and the wheels of a
    // package named acme-cu13 ("acme_cu13_cu13_sm90a-...", "acme_cu13-...") are not acme's.
    static const std::regex target_wheel(R"(^_cu[0-9]+_(sm|compute)[0-9]+[af]?-.*)");
    if (!starts_with(name, dist) ||
        !std::regex_match(std::string(name.substr(dist.size())), target_wheel))
      return std::nullopt;
    // {distribution}-{version}(-{build})?-{python}-{abi}-{platform}.whl; the distribution
    // itself holds no '-' (PEP 427 escapes it to '_').
    std::size_t a = name.find('-');
    std::size_t b = a == std::string_view::npos ? a : name.find('-', a + 1);
    if (b == std::string_view::npos) return std::nullopt;
    std::string field(name.substr(a + 1, b - a - 1));
    if (field == v || field == pep440) return ReleaseFileKind::Wheel;
    return std::nullopt;
  }
  if (reference && starts_with(name, "kiln-" + v + "-cuda") && ends_with(name, ".tar.zst"))
    return ReleaseFileKind::Tarball;
  if (starts_with(name, p + "-" + v + "-") || (reference && starts_with(name, "kiln-" + v + "-")))
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
  // RECORD, WHEEL and METADATA well formed (packager/wheel/wheel.hpp).
  std::vector<std::string> out;
  for (const auto& p : wheel::verify_wheel(path)) out.push_back(p.file + ": " + p.what);
  return out;
}

// --- shared by the mirror files (mirror_internal.hpp) ------------------------------------------

std::vector<ReleaseName> releases_in(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec))
    throw Error(ErrorKind::NotFound, "mirror directory " + dir.string() + " does not exist");
  std::set<std::pair<std::string, std::string>> found;
  std::uint64_t seen = 0;
  fs::directory_iterator it(dir, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (++seen > io::limits::kMaxStoreEntries)
      throw Error(ErrorKind::Limit, dir.string() + " holds more than " +
                                        std::to_string(io::limits::kMaxStoreEntries) +
                                        " entries, the limit (docs/security.md)");
    std::string name = it->path().filename().string();
    for (std::string_view suffix : {"-SHA256SUMS", "-index.json"})
      if (auto r = format::release_of_file_name(name, suffix)) found.emplace(r->package, r->version);
  }
  if (ec) throw Error(ErrorKind::Io, "cannot list " + dir.string() + ": " + ec.message());
  std::vector<ReleaseName> out;
  for (const auto& [package, version] : found) out.push_back({package, version});
  return out;
}

namespace detail {

// --- the lock of a release in a mirror --------------------------------------------------------

std::string sync_staging_prefix(const std::string& package, const std::string& version) {
  return ".kiln-sync-" + package + "-" + version + "-";
}

io::FileLock lock_release_in_mirror(const fs::path& mirror, const std::string& package,
                                const std::string& version, std::chrono::milliseconds wait) {
  std::error_code ec;
  io::FileLock lock = io::FileLock::acquire_directory(mirror, wait);
  if (!lock.held()) return lock;  // a filesystem that cannot lock a directory: nothing removed
  io::remove_orphaned_temps_if(mirror, [&](std::string_view file) {
    return format::names_release_file(file, package, version);
  });
  const std::string staging = sync_staging_prefix(package, version);
  for (fs::directory_iterator it(mirror, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code rm;
    if (starts_with(it->path().filename().string(), staging)) fs::remove_all(it->path(), rm);
  }
  return lock;
}

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

Digest digest_of(const fs::path& p) {
  Digest d;
  std::size_t size = 0;
  d.sha256 = io::sha256_file(p, &size);
  d.size = size;
  return d;
}

bool is_regular(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

ReleaseName resolved_release(const std::string& package, const std::string& version) {
  if (package.empty() || !format::is_package_name(package))
    throw Error(ErrorKind::Usage, package.empty() ? std::string("no package named for the mirror "
                                                                "release (--package or --source)")
                                                  : "'" + package + "': " + format::kPackageNameRule);
  if (version.empty())
    throw Error(ErrorKind::Usage, "no version of " + package + " named (--version or --source)");
  check_release_version(version);
  return {package, version};
}

std::string resolved_pin(const std::string& pin, const char* option) {
  std::string p = lower(pin);
  if (!p.empty() && !io::is_sha256_hex(p))
    throw Error(ErrorKind::Usage,
                std::string(option) + " '" + pin + "' is not a SHA-256 digest (64 hex digits)");
  return p;
}

std::map<std::string, ReleaseFileKind> release_files_in(const fs::path& dir,
                                                        const std::string& package,
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
    if (auto kind = classify_release_file(name, package, version)) out.emplace(name, *kind);
  }
  return out;
}

std::vector<store::VerifyProblem> check_archive_content(const fs::path& path, const format::IndexEntry& e,
                                                 const format::Index& idx, const std::string& version,
                                                 const std::string& index_origin) {
  format::Manifest m;
  std::vector<store::VerifyProblem> problems = store::verify_archive_file(path, version, &m);
  if (m.package_version.empty()) return problems;  // manifest unreadable: already reported
  auto against_index = store::manifest_index_problems(m, e, idx, path.string(), index_origin);
  problems.insert(problems.end(), against_index.begin(), against_index.end());
  return problems;
}

std::string join_problems(const std::vector<store::VerifyProblem>& problems) {
  std::string out;
  for (const auto& p : problems) out += "\n  " + p.message;
  return out;
}

}  // namespace detail
}  // namespace kiln::mirror
