#include "wheel.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>

#include "atomic_file.hpp"
#include "kiln/sha256.hpp"
#include "kiln/store.hpp"
#include "kiln/target.hpp"
#include "kiln/version.hpp"
#include "libarchive_handles.hpp"

namespace kiln::wheel {
namespace {

namespace fs = std::filesystem;

constexpr const char* kManifestName = "manifest.json";
// The latest time a DOS timestamp holds: 2107-12-31T23:59:58Z.
constexpr std::int64_t kZipEpochMax = 4354819198;

std::string base64_urlsafe_nopad(const unsigned char* data, std::size_t n) {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  std::size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    unsigned v = (data[i] << 16) | (data[i + 1] << 8) | data[i + 2];
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += alphabet[(v >> 6) & 63];
    out += alphabet[v & 63];
  }
  if (n - i == 1) {
    unsigned v = data[i] << 16;
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
  } else if (n - i == 2) {
    unsigned v = (data[i] << 16) | (data[i + 1] << 8);
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += alphabet[(v >> 6) & 63];
  }
  return out;
}

// Values that go into __init__.py string literals and METADATA: validated strings only, so no
// escaping is ever needed.
void require_plain(std::string_view what, std::string_view value) {
  bool ok = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
           c == '+';
  });
  if (!ok)
    throw Error(ErrorKind::Format, std::string(what) + " '" + std::string(value) +
                                       "' holds characters a wheel cannot carry");
}

std::string cuda_major(std::string_view cuda_version) {
  auto dot = cuda_version.find('.');
  std::string_view major = cuda_version.substr(0, dot);
  bool ok = !major.empty() &&
            std::all_of(major.begin(), major.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!ok)
    throw Error(ErrorKind::Format,
                "CUDA version '" + std::string(cuda_version) + "' does not start with a major");
  return std::string(major);
}

std::string init_py(const Manifest& m) {
  std::string v = pep440_version(m.package_version);
  std::ostringstream s;
  s << "\"\"\"CUDA kernels for " << m.target << " (CUDA " << m.cuda_version
    << "), built ahead of time by kiln.\n\n"
    << "Data only: libkiln reads the fatbins under artifact_dir(). Point it there with\n"
    << "KILN_ARTIFACT_PATH=$(python -c 'import "
    << wheel_name_component(distribution_name(m.cuda_version, m.target))
    << " as k; print(k.artifact_dir())')\n\"\"\"\n\n"
    << "import os\n\n"
    << "__version__ = \"" << v << "\"\n"
    << "TARGET = \"" << m.target << "\"\n"
    << "CUDA_VERSION = \"" << m.cuda_version << "\"\n\n\n"
    << "def artifact_dir():\n"
    << "    \"\"\"Absolute path of the kiln store inside this package (for "
       "KILN_ARTIFACT_PATH).\"\"\"\n"
    << "    return os.path.join(os.path.dirname(os.path.abspath(__file__)), \"artifacts\")\n";
  return s.str();
}

// ---- zip timestamps

// libarchive converts mtimes to DOS date/time with localtime(), so its bytes would depend on
// the time zone of the machine. The DOS fields are rewritten to the UTC breakdown (what
// `wheel` and pip's reproducible builds use); the UT extra field already holds the UTC epoch.
std::uint32_t dos_time_utc(std::int64_t epoch) {
  std::time_t t = static_cast<std::time_t>(epoch);
  std::tm tm{};
  if (!gmtime_r(&t, &tm)) throw Error(ErrorKind::Internal, "gmtime failed");
  std::uint32_t date = ((static_cast<std::uint32_t>(tm.tm_year) - 80) << 9) |
                       (static_cast<std::uint32_t>(tm.tm_mon + 1) << 5) |
                       static_cast<std::uint32_t>(tm.tm_mday);
  std::uint32_t time = (static_cast<std::uint32_t>(tm.tm_hour) << 11) |
                       (static_cast<std::uint32_t>(tm.tm_min) << 5) |
                       (static_cast<std::uint32_t>(tm.tm_sec) >> 1);
  return (date << 16) | time;
}

std::uint32_t le16(const std::string& b, std::size_t off) {
  return static_cast<unsigned char>(b[off]) | (static_cast<unsigned char>(b[off + 1]) << 8);
}
std::uint32_t le32(const std::string& b, std::size_t off) {
  return le16(b, off) | (le16(b, off + 2) << 16);
}
void put_le32(std::string& b, std::size_t off, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b[off + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

// Walks the central directory (no zip64: wheels here stay far below 4 GiB per entry, and
// write_zip refuses more) and sets every entry's DOS date/time in it and in its local header.
void set_dos_times(std::string& zip, std::uint32_t dos, std::size_t entries_expected) {
  auto bad = [](const std::string& why) {
    throw Error(ErrorKind::Internal, "libarchive wrote an unexpected zip layout: " + why);
  };
  if (zip.size() < 22) bad("shorter than an end record");
  std::size_t eocd = zip.size() - 22;
  if (zip.compare(eocd, 4, "PK\x05\x06") != 0) bad("no end record in the last 22 bytes");
  std::size_t count = le16(zip, eocd + 10);
  std::size_t cd = le32(zip, eocd + 16);
  if (count != entries_expected) bad("entry count " + std::to_string(count));
  for (std::size_t i = 0; i < count; ++i) {
    if (cd + 46 > eocd || zip.compare(cd, 4, "PK\x01\x02") != 0)
      bad("central directory entry " + std::to_string(i));
    std::size_t local = le32(zip, cd + 42);
    if (local + 30 > zip.size() || zip.compare(local, 4, "PK\x03\x04") != 0)
      bad("local header of entry " + std::to_string(i));
    put_le32(zip, cd + 12, dos);
    put_le32(zip, local + 10, dos);
    cd += 46 + le16(zip, cd + 28) + le16(zip, cd + 30) + le16(zip, cd + 32);
  }
}

bool is_plain_path(const std::string& p) {
  if (p.empty() || p.front() == '/' || p.back() == '/' || p.find('\\') != std::string::npos ||
      p.find('\0') != std::string::npos)
    return false;
  std::size_t start = 0;
  for (;;) {
    std::size_t slash = p.find('/', start);
    std::string part =
        p.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    if (slash == std::string::npos) return true;
    start = slash + 1;
  }
}

// ---- wheel file names and metadata files

struct WheelName {
  std::string name;
  std::string version;
  std::set<std::string> tags;  // expanded "py-abi-plat"
};

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    std::size_t at = s.find(sep, start);
    out.emplace_back(s.substr(start, at == std::string_view::npos ? s.npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

std::optional<WheelName> parse_wheel_file_name(const std::string& file) {
  const std::string ext = ".whl";
  if (file.size() <= ext.size() || file.compare(file.size() - ext.size(), ext.size(), ext) != 0)
    return std::nullopt;
  auto parts = split(std::string_view(file).substr(0, file.size() - ext.size()), '-');
  if (parts.size() != 5 && parts.size() != 6) return std::nullopt;
  for (const auto& p : parts)
    if (p.empty()) return std::nullopt;
  WheelName w;
  w.name = parts[0];
  w.version = parts[1];
  std::size_t t = parts.size() - 3;
  for (const auto& py : split(parts[t], '.'))
    for (const auto& abi : split(parts[t + 1], '.'))
      for (const auto& plat : split(parts[t + 2], '.')) w.tags.insert(py + "-" + abi + "-" + plat);
  return w;
}

// "Key: Value" lines up to the first blank line (the METADATA body follows it).
std::multimap<std::string, std::string> parse_headers(const std::string& text) {
  std::multimap<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) break;
    auto colon = line.find(':');
    if (colon == std::string::npos || line[0] == ' ' || line[0] == '\t') continue;
    std::string value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.erase(0, 1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.pop_back();
    out.emplace(line.substr(0, colon), value);
  }
  return out;
}

std::optional<std::string> header(const std::multimap<std::string, std::string>& h,
                                  const std::string& key) {
  auto it = h.find(key);
  if (it == h.end()) return std::nullopt;
  return it->second;
}

// One RECORD row as the csv module writes and reads it: comma-separated, fields with a comma
// or quote in double quotes, quotes doubled. nullopt for a malformed row.
std::optional<std::vector<std::string>> parse_csv_row(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"' && fields.back().empty()) {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  if (quoted) return std::nullopt;
  return fields;
}

}  // namespace

// ---------------------------------------------------------------- names

std::string distribution_name(std::string_view cuda_version, std::string_view target) {
  auto t = parse_target(target);
  if (!t) throw Error(ErrorKind::Usage, "'" + std::string(target) + "' is not a target");
  std::string compact = t->str();
  compact.erase(std::remove(compact.begin(), compact.end(), '_'), compact.end());
  return "kiln-kernels-cu" + cuda_major(cuda_version) + "-" + compact;
}

std::string wheel_name_component(std::string_view distribution) {
  std::string out;
  bool in_run = false;
  for (char c : distribution) {
    if (c == '-' || c == '_' || c == '.') {
      if (!in_run) out += '_';
      in_run = true;
    } else {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      in_run = false;
    }
  }
  return out;
}

std::string pep440_version(std::string_view package_version) {
  static const std::regex re(
      R"(^(\d+\.\d+\.\d+)(?:-(a|alpha|b|beta|rc|c|pre|preview|dev)\.?(\d+))?$)", std::regex::icase);
  std::string v(package_version);
  std::smatch m;
  if (!std::regex_match(v, m, re))
    throw Error(ErrorKind::Format, "package version '" + v +
                                       "' has no PEP 440 spelling (expected MAJOR.MINOR.PATCH, "
                                       "optionally -aN, -bN, -rcN or -devN)");
  if (!m[2].matched) return m[1];
  std::string pre = m[2];
  std::transform(pre.begin(), pre.end(), pre.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (pre == "alpha") pre = "a";
  if (pre == "beta") pre = "b";
  if (pre == "c" || pre == "pre" || pre == "preview") pre = "rc";
  if (pre == "dev") return std::string(m[1]) + ".dev" + std::to_string(std::stoull(m[3]));
  return std::string(m[1]) + pre + std::to_string(std::stoull(m[3]));
}

std::string wheel_file_name(std::string_view package_version, std::string_view cuda_version,
                            std::string_view target) {
  return wheel_name_component(distribution_name(cuda_version, target)) + "-" +
         pep440_version(package_version) + "-py3-none-any.whl";
}

std::string record_hash(std::string_view data) {
  std::string hex = sha256_hex(data);
  unsigned char raw[32];
  for (int i = 0; i < 32; ++i)
    raw[i] = static_cast<unsigned char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return "sha256=" + base64_urlsafe_nopad(raw, sizeof raw);
}

// ---------------------------------------------------------------- contents

std::vector<WheelFile> wheel_contents(const Manifest& manifest,
                                      const std::vector<ArchiveMember>& members,
                                      std::string_view generator_version) {
  require_plain("package version", manifest.package_version);
  require_plain("CUDA version", manifest.cuda_version);
  require_plain("target", manifest.target);
  require_plain("kiln version", generator_version);
  const std::string dist = distribution_name(manifest.cuda_version, manifest.target);
  const std::string pkg = wheel_name_component(dist);
  const std::string version = pep440_version(manifest.package_version);
  const std::string stem =
      archive_stem(manifest.package_version, manifest.cuda_version, manifest.target);
  const std::string dist_info = pkg + "-" + version + ".dist-info";

  std::vector<WheelFile> files;
  files.push_back({pkg + "/__init__.py", init_py(manifest)});
  for (const auto& m : members) {
    if (!is_plain_path(m.name) || m.name.find('/') != std::string::npos)
      throw Error(ErrorKind::Format, "archive member '" + m.name + "' is not a plain file name");
    files.push_back({pkg + "/artifacts/" + stem + "/" + m.name, m.data});
  }
  std::sort(files.begin(), files.end(),
            [](const WheelFile& a, const WheelFile& b) { return a.path < b.path; });

  std::string metadata = "Metadata-Version: 2.1\n";
  metadata += "Name: " + dist + "\n";
  metadata += "Version: " + version + "\n";
  metadata += "Summary: CUDA kernels for " + manifest.target + " (CUDA " + manifest.cuda_version +
              ") built ahead of time by kiln, loaded by libkiln\n";
  metadata += "Requires-Python: >=3.8\n";
  files.push_back({dist_info + "/METADATA", std::move(metadata)});

  std::string wheel_txt = "Wheel-Version: 1.0\n";
  wheel_txt += "Generator: kiln " + std::string(generator_version) + "\n";
  wheel_txt += "Root-Is-Purelib: true\n";
  wheel_txt += "Tag: py3-none-any\n";
  files.push_back({dist_info + "/WHEEL", std::move(wheel_txt)});

  std::string record;
  for (const auto& f : files) {
    // Paths come from validated names: nothing the csv module would quote.
    if (f.path.find_first_of(",\"\r\n") != std::string::npos)
      throw Error(ErrorKind::Format, "wheel path '" + f.path + "' cannot be written in RECORD");
    record += f.path + "," + record_hash(f.data) + "," + std::to_string(f.data.size()) + "\n";
  }
  record += dist_info + "/RECORD,,\n";
  files.push_back({dist_info + "/RECORD", std::move(record)});
  return files;
}

// ---------------------------------------------------------------- zip I/O

std::string write_zip(const fs::path& out, const std::vector<WheelFile>& files,
                      std::int64_t mtime_epoch) {
  std::set<std::string> seen;
  for (const auto& f : files) {
    bool ascii =
        std::all_of(f.path.begin(), f.path.end(), [](char c) { return c > 0x20 && c < 0x7f; });
    if (!ascii || !is_plain_path(f.path))
      throw Error(ErrorKind::Usage, "cannot write " + out.string() + ": member path '" + f.path +
                                        "' is not a relative printable-ASCII path");
    if (!seen.insert(f.path).second)
      throw Error(ErrorKind::Usage,
                  "cannot write " + out.string() + ": member '" + f.path + "' appears twice");
    // Above 0xf0000000 libarchive switches to zip64 extra fields that set_dos_times skips.
    if (f.data.size() >= 0xf0000000u)
      throw Error(ErrorKind::Usage,
                  "cannot write " + out.string() + ": member '" + f.path + "' is over 3.75 GiB");
  }
  const std::int64_t mtime = std::clamp(mtime_epoch, kZipEpochMin, kZipEpochMax);

  std::string bytes;
  {
    std::unique_ptr<struct archive, ArchiveWriteFree> a(archive_write_new());
    if (!a) throw Error(ErrorKind::Internal, "libarchive: archive_write_new failed");
    auto check = [&](int r, const std::string& what) {
      if (r != ARCHIVE_OK)
        throw Error(ErrorKind::Io,
                    "cannot write " + out.string() + ": " + what + ": " + la_error(a.get()));
    };
    check(archive_write_set_format_zip(a.get()), "set zip format");
    check(archive_write_zip_set_compression_deflate(a.get()), "set deflate");
    check(archive_write_set_format_option(a.get(), "zip", "compression-level", "9"),
          "set deflate level");
    // No blocking and no padding after the end record: the zip ends where its last record does.
    check(archive_write_set_bytes_per_block(a.get(), 0), "set block size");
    check(archive_write_set_bytes_in_last_block(a.get(), 1), "set last block size");
    auto sink = [](struct archive*, void* client, const void* buf, size_t n) -> la_ssize_t {
      static_cast<std::string*>(client)->append(static_cast<const char*>(buf), n);
      return static_cast<la_ssize_t>(n);
    };
    check(archive_write_open(a.get(), &bytes, nullptr, sink, nullptr), "open");
    for (const auto& f : files) {
      std::unique_ptr<archive_entry, EntryFree> e(archive_entry_new());
      if (!e) throw Error(ErrorKind::Internal, "libarchive: archive_entry_new failed");
      archive_entry_set_pathname(e.get(), f.path.c_str());
      archive_entry_set_filetype(e.get(), AE_IFREG);
      archive_entry_set_perm(e.get(), 0644);
      archive_entry_set_size(e.get(), static_cast<la_int64_t>(f.data.size()));
      archive_entry_set_mtime(e.get(), static_cast<time_t>(mtime), 0);
      archive_entry_set_uid(e.get(), 0);
      archive_entry_set_gid(e.get(), 0);
      check(archive_write_header(a.get(), e.get()), "header of " + f.path);
      std::size_t off = 0;
      while (off < f.data.size()) {
        la_ssize_t n = archive_write_data(a.get(), f.data.data() + off, f.data.size() - off);
        if (n <= 0)
          throw Error(ErrorKind::Io, "cannot write " + out.string() + ": data of " + f.path + ": " +
                                         la_error(a.get()));
        off += static_cast<std::size_t>(n);
      }
      check(archive_write_finish_entry(a.get()), "end of " + f.path);
    }
    check(archive_write_close(a.get()), "close");
  }
  set_dos_times(bytes, dos_time_utc(mtime), files.size());

  AtomicFile file(out);
  file.write(bytes);
  file.commit();
  return bytes;
}

std::vector<WheelFile> read_zip(const fs::path& zip) {
  const std::string where = zip.string();
  std::string bytes = read_whole_file(zip);
  std::unique_ptr<struct archive, ArchiveReadFree> a(archive_read_new());
  if (!a) throw Error(ErrorKind::Internal, "libarchive: archive_read_new failed");
  // The central directory, as pip and zipfile read it, not the local headers.
  if (archive_read_support_format_zip_seekable(a.get()) != ARCHIVE_OK)
    throw Error(ErrorKind::Internal, "libarchive cannot read zip here: " + la_error(a.get()));
  if (archive_read_open_memory(a.get(), bytes.data(), bytes.size()) != ARCHIVE_OK)
    throw Error(ErrorKind::Format, "cannot open " + where + " as a zip: " + la_error(a.get()));
  std::vector<WheelFile> out;
  std::uint64_t total = 0;
  for (;;) {
    archive_entry* e = nullptr;
    int r = archive_read_next_header(a.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK)
      throw Error(ErrorKind::Format, where + ": bad zip entry after " + std::to_string(out.size()) +
                                         " files: " + la_error(a.get()));
    const char* raw = archive_entry_pathname(e);
    std::string name = raw ? raw : "";
    auto type = archive_entry_filetype(e);
    if (type == AE_IFDIR) continue;  // directory entries are allowed and carry nothing
    if (type != AE_IFREG || archive_entry_symlink(e) || archive_entry_hardlink(e))
      throw Error(ErrorKind::Format, where + ": entry '" + name + "' is not a regular file");
    WheelFile f;
    f.path = name;
    char buf[1 << 16];
    for (;;) {
      la_ssize_t n = archive_read_data(a.get(), buf, sizeof buf);
      if (n == 0) break;
      if (n < 0)
        throw Error(ErrorKind::Format,
                    where + ": cannot read entry '" + name + "': " + la_error(a.get()));
      total += static_cast<std::uint64_t>(n);
      if (total > kMaxArchiveBytes)
        throw Error(ErrorKind::Format, where + ": files exceed the limit of " +
                                           std::to_string(kMaxArchiveBytes) + " bytes");
      f.data.append(buf, static_cast<std::size_t>(n));
    }
    out.push_back(std::move(f));
  }
  if (archive_read_close(a.get()) != ARCHIVE_OK)
    throw Error(ErrorKind::Format, where + ": " + la_error(a.get()));
  return out;
}

// ---------------------------------------------------------------- building

namespace {

fs::path find_index(const fs::path& dist) {
  std::error_code ec;
  if (!fs::is_directory(dist, ec))
    throw Error(ErrorKind::NotFound, "dist directory not found: " + dist.string() +
                                         " (kiln build --dist DIR writes one)");
  std::vector<fs::path> found;
  for (fs::directory_iterator it(dist, ec), end; !ec && it != end; it.increment(ec)) {
    std::string n = it->path().filename().string();
    const std::string prefix = "kiln-kernels-", suffix = "-index.json";
    if (n.size() > prefix.size() + suffix.size() && n.compare(0, prefix.size(), prefix) == 0 &&
        n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
      found.push_back(it->path());
  }
  if (ec) throw Error(ErrorKind::Io, "cannot list " + dist.string() + ": " + ec.message());
  std::sort(found.begin(), found.end());
  if (found.empty())
    throw Error(ErrorKind::NotFound, "no kiln-kernels-<version>-index.json in " + dist.string() +
                                         " (kiln build --dist DIR writes one)");
  if (found.size() > 1) {
    std::string names;
    for (const auto& f : found) names += (names.empty() ? "" : ", ") + f.filename().string();
    throw Error(ErrorKind::Usage, dist.string() + " holds the indexes of several releases (" +
                                      names + "); give --dist a directory with one");
  }
  return found.front();
}

std::vector<IndexEntry> choose_archives(const Index& idx, const std::vector<std::string>& wanted,
                                        const std::string& index_name) {
  std::string listed;
  for (const auto& a : idx.archives) listed += (listed.empty() ? "" : ", ") + a.target;
  if (idx.archives.empty()) throw Error(ErrorKind::NotFound, index_name + " lists no archives");
  if (wanted.empty()) return idx.archives;
  std::vector<IndexEntry> chosen;
  std::vector<std::string> missing;
  for (const auto& w : wanted) {
    auto t = parse_target(w);
    if (!t)
      throw Error(ErrorKind::Usage, "--targets: '" + w +
                                        "' is not a target: expected sm_<arch>[a|f] or "
                                        "compute_<arch>[a|f], e.g. sm_90a or compute_80");
    std::string name = t->str();
    auto it = std::find_if(idx.archives.begin(), idx.archives.end(),
                           [&](const IndexEntry& e) { return e.target == name; });
    if (it == idx.archives.end()) {
      if (std::find(missing.begin(), missing.end(), name) == missing.end()) missing.push_back(name);
      continue;
    }
    bool dup = std::any_of(chosen.begin(), chosen.end(),
                           [&](const IndexEntry& e) { return e.target == name; });
    if (!dup) chosen.push_back(*it);
  }
  if (!missing.empty()) {
    std::string names;
    for (const auto& m : missing) names += (names.empty() ? "" : ", ") + m;
    throw Error(ErrorKind::NotFound, "target" + std::string(missing.size() > 1 ? "s " : " ") +
                                         names + " not in " + index_name + ", which lists " +
                                         listed);
  }
  return chosen;
}

std::string join_problems(const std::vector<VerifyProblem>& problems) {
  std::string s;
  for (const auto& p : problems) s += (s.empty() ? "" : "\n  ") + p.message;
  return s;
}

BuiltWheel build_one(const fs::path& index_path, const Index& idx, const IndexEntry& entry,
                     const BuildOptions& options) {
  const fs::path archive = index_path.parent_path() / entry.file;
  const std::string as = archive.string();
  const std::string ip = index_path.string();
  // Read once; every check below and the wheel itself use these very bytes.
  std::string bytes = read_whole_file(archive);
  if (bytes.size() != entry.size)
    throw Error(ErrorKind::Integrity, as + ": size is " + std::to_string(bytes.size()) +
                                          " bytes, " + ip + " says " + std::to_string(entry.size));
  std::string digest = sha256_hex(bytes);
  if (digest != entry.sha256)
    throw Error(ErrorKind::Integrity,
                as + ": sha256 is " + digest + ", " + ip + " says " + entry.sha256);
  auto members = read_archive_bytes(bytes, as);
  bytes.clear();
  bytes.shrink_to_fit();
  Manifest m;
  auto problems = verify_archive_members(members, as, &m);
  if (!problems.empty())
    throw Error(*most_severe(problems),
                "refusing to make a wheel of " + as + ":\n  " + join_problems(problems));
  auto agree = [&](const char* field, const std::string& in_manifest, const std::string& in_index) {
    if (in_manifest != in_index)
      throw Error(ErrorKind::Integrity, as + ": manifest " + field + " is " + in_manifest + ", " +
                                            ip + " says " + in_index);
  };
  agree("target", m.target, entry.target);
  agree("package_version", m.package_version, idx.package_version);
  agree("cuda_version", m.cuda_version, idx.cuda_version);

  auto files = wheel_contents(m, members, kiln::version());
  members.clear();
  const fs::path whl = options.out / wheel_file_name(m.package_version, m.cuda_version, m.target);
  std::string written = write_zip(whl, files, options.source_date_epoch.value_or(m.build_time));
  // What was written is checked as a user would check it before anyone else sees it.
  auto wheel_problems = verify_wheel(whl);
  if (!wheel_problems.empty()) {
    std::error_code ec;
    fs::remove(whl, ec);
    throw Error(ErrorKind::Internal, whl.string() +
                                         " failed its own check: " + wheel_problems.front().file +
                                         ": " + wheel_problems.front().what);
  }
  return BuiltWheel{m.target, whl, written.size(), sha256_hex(written)};
}

}  // namespace

BuildResult build_wheels(const BuildOptions& options,
                         const std::function<void(const BuiltWheel&)>& on_wheel) {
  const fs::path index_path = find_index(options.dist);
  const Index idx = parse_index(read_whole_file(index_path), index_path.string());
  const auto chosen = choose_archives(idx, options.targets, index_path.string());
  std::error_code ec;
  fs::create_directories(options.out, ec);
  if (ec || !fs::is_directory(options.out))
    throw Error(ErrorKind::Io, "cannot create output directory " + options.out.string() +
                                   (ec ? ": " + ec.message() : ""));
  BuildResult result;
  for (const auto& entry : chosen) {
    try {
      result.wheels.push_back(build_one(index_path, idx, entry, options));
      if (on_wheel) on_wheel(result.wheels.back());
    } catch (const Error& e) {
      result.failed.push_back({entry.target, e.kind(), e.what()});
    }
  }
  return result;
}

// ---------------------------------------------------------------- checking

std::vector<WheelProblem> verify_wheel(const fs::path& whl) {
  std::vector<WheelProblem> problems;
  const std::string w = whl.string();
  auto add = [&](const std::string& file, const std::string& what) {
    problems.push_back({file, what});
  };
  const std::string file_name = whl.filename().string();
  std::optional<WheelName> wn = parse_wheel_file_name(file_name);
  if (!wn)
    add(w, "file name '" + file_name +
               "' is not <name>-<version>[-<build>]-<python>-<abi>-<platform>.whl");

  std::vector<WheelFile> files;
  try {
    files = read_zip(whl);
  } catch (const Error& e) {
    add(w, e.what());
    return problems;
  }

  std::map<std::string, const WheelFile*> by_path;
  std::set<std::string> dist_infos;
  for (const auto& f : files) {
    const std::string where = w + ":" + f.path;
    if (!is_plain_path(f.path))
      add(where, "path is absolute, holds '..' or '.', a backslash or an empty part");
    if (!by_path.emplace(f.path, &f).second) add(where, "appears more than once in the zip");
    auto slash = f.path.find('/');
    std::string top = f.path.substr(0, slash);
    const std::string sfx = ".dist-info";
    if (slash != std::string::npos && top.size() > sfx.size() &&
        top.compare(top.size() - sfx.size(), sfx.size(), sfx) == 0)
      dist_infos.insert(top);
  }
  if (dist_infos.size() != 1) {
    std::string names;
    for (const auto& d : dist_infos) names += (names.empty() ? "" : ", ") + d;
    add(w, "holds " + std::to_string(dist_infos.size()) + " .dist-info directories" +
               (names.empty() ? "" : " (" + names + ")") + ", expected exactly one");
    return problems;
  }
  const std::string di = *dist_infos.begin();
  if (wn) {
    const std::string expected = wn->name + "-" + wn->version + ".dist-info";
    const std::string base = di.substr(0, di.size() - std::string(".dist-info").size());
    auto dash = base.rfind('-');
    std::string di_name = base.substr(0, dash == std::string::npos ? 0 : dash);
    std::string di_version = dash == std::string::npos ? "" : base.substr(dash + 1);
    if (wheel_name_component(di_name) != wheel_name_component(wn->name) ||
        di_version != wn->version)
      add(w + ":" + di, "does not match the file name, which needs " + expected);
  }

  auto find = [&](const std::string& name) -> const WheelFile* {
    auto it = by_path.find(di + "/" + name);
    if (it == by_path.end()) {
      add(w, di + "/" + name + " is missing");
      return nullptr;
    }
    return it->second;
  };

  if (const WheelFile* wheel_file = find("WHEEL")) {
    const std::string where = w + ":" + wheel_file->path;
    auto h = parse_headers(wheel_file->data);
    auto version = header(h, "Wheel-Version");
    if (!version)
      add(where, "has no Wheel-Version");
    else if (version->rfind("1.", 0) != 0)
      add(where, "Wheel-Version is " + *version + ", this kiln reads 1.x");
    auto purelib = header(h, "Root-Is-Purelib");
    if (!purelib || (*purelib != "true" && *purelib != "false"))
      add(where, "Root-Is-Purelib must be true or false");
    std::set<std::string> tags;
    for (auto [it, end] = h.equal_range("Tag"); it != end; ++it) tags.insert(it->second);
    if (tags.empty()) add(where, "has no Tag");
    if (wn && !tags.empty() && tags != wn->tags) {
      std::string listed;
      for (const auto& t : tags) listed += (listed.empty() ? "" : ", ") + t;
      std::string named;
      for (const auto& t : wn->tags) named += (named.empty() ? "" : ", ") + t;
      add(where, "tags " + listed + " differ from the file name's " + named);
    }
  }
  if (const WheelFile* metadata = find("METADATA")) {
    const std::string where = w + ":" + metadata->path;
    auto h = parse_headers(metadata->data);
    if (!header(h, "Metadata-Version")) add(where, "has no Metadata-Version");
    auto name = header(h, "Name");
    auto version = header(h, "Version");
    if (!name)
      add(where, "has no Name");
    else if (wn && wheel_name_component(*name) != wheel_name_component(wn->name))
      add(where, "Name is " + *name + ", the file name says " + wn->name);
    if (!version)
      add(where, "has no Version");
    else if (wn && *version != wn->version)
      add(where, "Version is " + *version + ", the file name says " + wn->version);
  }

  const std::string record_path = di + "/RECORD";
  const WheelFile* record = find("RECORD");
  if (!record) return problems;
  const std::string rw = w + ":" + record_path;
  std::set<std::string> listed;
  std::istringstream in(record->data);
  std::string line;
  int row = 0;
  while (std::getline(in, line)) {
    ++row;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const std::string at = rw + " row " + std::to_string(row);
    auto fields = parse_csv_row(line);
    if (!fields || fields->size() != 3) {
      add(at, "is not path,hash,size");
      continue;
    }
    const std::string& path = (*fields)[0];
    const std::string& hash = (*fields)[1];
    const std::string& size = (*fields)[2];
    if (!is_plain_path(path)) add(at, "path '" + path + "' is absolute or holds '..'");
    if (!listed.insert(path).second) {
      add(at, path + " is listed more than once");
      continue;
    }
    if (path == record_path) continue;  // RECORD cannot hold its own digest
    auto it = by_path.find(path);
    if (it == by_path.end()) {
      add(at, path + " is listed but not in the wheel");
      continue;
    }
    const std::string& data = it->second->data;
    const std::string fw = w + ":" + path;
    if (size != std::to_string(data.size()))
      add(fw, "size is " + std::to_string(data.size()) + " bytes, RECORD says '" + size + "'");
    if (hash.rfind("sha256=", 0) != 0) {
      add(fw, "RECORD hash '" + hash + "' is not sha256=... (kiln checks sha256)");
      continue;
    }
    std::string actual = record_hash(data);
    if (hash != actual) add(fw, "hash is " + actual + ", RECORD says " + hash);
  }
  if (!listed.count(record_path)) add(rw, "does not list itself (" + record_path + ",,)");
  for (const auto& f : files) {
    // Signatures of RECORD cannot be listed in it (binary distribution format).
    if (f.path == di + "/RECORD.jws" || f.path == di + "/RECORD.p7s") continue;
    if (!listed.count(f.path)) add(w + ":" + f.path, "is not listed in RECORD");
  }
  return problems;
}

std::vector<Manifest> wheel_manifests(const fs::path& whl) {
  auto files = read_zip(whl);
  std::sort(files.begin(), files.end(),
            [](const WheelFile& a, const WheelFile& b) { return a.path < b.path; });
  std::vector<Manifest> out;
  for (const auto& f : files) {
    auto parts = split(f.path, '/');
    if (parts.size() != 4 || parts[1] != "artifacts" || parts[3] != kManifestName) continue;
    const std::string origin = whl.string() + ":" + f.path;
    Manifest m = parse_manifest(f.data, origin);
    std::string stem = archive_stem(m.package_version, m.cuda_version, m.target);
    if (parts[2] != stem)
      throw Error(ErrorKind::Format, origin + ": directory " + parts[2] +
                                         " does not match the manifest, which names " + stem);
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace kiln::wheel
