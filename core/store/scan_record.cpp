#include "store/scan_record.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

#include "format/manifest.hpp"
#include "io/file_descriptor.hpp"
#include "io/limits.hpp"
#include "io/sha256.hpp"
#include "kiln/version.hpp"
#include "store/store_scan.hpp"

namespace kiln::store {
namespace {

// Version 3: names only, and the record's own SHA-256 on its last line, so that a flipped byte
// (bit rot) that would still parse (another archive name, hiding the real one) is caught and the
// record ignored. Version 2 had no digest; version 1 also held each manifest's layout, which
// ManifestEntries::open made unnecessary. Records of other versions are ignored and rewritten.
constexpr std::string_view kFirstLine = "kiln-scan-record 3";

// Which libkiln wrote a record: another one (a cache shared by environments with different
// kiln versions) may apply other store and manifest rules, so it does not take the record.
const std::string& writer_line() {
  static const std::string line =
      std::string("writer kiln ") + version() + " manifest-format " + std::to_string(format::kManifestFormat);
  return line;
}

std::uint64_t fnv1a64(std::string_view a, std::string_view b) {
  std::uint64_t h = 14695981039346656037ull;
  auto mix = [&](unsigned char c) {
    h ^= c;
    h *= 1099511628211ull;
  };
  for (unsigned char c : a) mix(c);
  mix('\n');
  for (unsigned char c : b) mix(c);
  return h;
}

// Reads a record one line and one space-separated field at a time. Every method returns false
// when the text is not what it asks for; nothing is read past the end.
class RecordReader {
 public:
  explicit RecordReader(std::string_view text) : t_(text) {}

  bool at_end() const { return p_ == t_.size(); }
  std::size_t position() const { return p_; }

  // The next line's first field, when it is `word`, leaving the rest of the line to read.
  bool keyword(std::string_view word) {
    if (t_.compare(p_, word.size(), word) != 0) return false;
    std::size_t after = p_ + word.size();
    if (after >= t_.size() || (t_[after] != ' ' && t_[after] != '\n')) return false;
    p_ = after;
    return true;
  }
  // The whole line, when it is `line`.
  bool line(std::string_view line) {
    if (t_.compare(p_, line.size(), line) != 0 || p_ + line.size() >= t_.size() ||
        t_[p_ + line.size()] != '\n')
      return false;
    p_ += line.size() + 1;
    return true;
  }
  // ' ' then the rest of the line (at least one byte), and the '\n'.
  bool rest(std::string_view& out) {
    if (p_ >= t_.size() || t_[p_] != ' ') return false;
    std::size_t begin = p_ + 1, nl = t_.find('\n', begin);
    if (nl == std::string_view::npos || nl == begin) return false;
    out = t_.substr(begin, nl - begin);
    p_ = nl + 1;
    return true;
  }
  // ' ' then a field without spaces.
  bool word(std::string_view& out) {
    if (p_ >= t_.size() || t_[p_] != ' ') return false;
    std::size_t begin = ++p_;
    while (p_ < t_.size() && t_[p_] != ' ' && t_[p_] != '\n') ++p_;
    out = t_.substr(begin, p_ - begin);
    return !out.empty();
  }
  // ' ' then 0 or [1-9][0-9]* below 2^64.
  bool number(std::uint64_t& out) {
    if (p_ >= t_.size() || t_[p_] != ' ') return false;
    ++p_;
    return digits(out);
  }
  // ' ' then an int64 in decimal, '-' allowed (timestamps before 1970).
  bool signed_number(std::int64_t& out) {
    if (p_ >= t_.size() || t_[p_] != ' ') return false;
    ++p_;
    bool negative = p_ < t_.size() && t_[p_] == '-';
    if (negative) ++p_;
    std::uint64_t v = 0;
    if (!digits(v)) return false;
    const auto max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    if (negative ? v > max + 1 || v == 0 : v > max) return false;
    out = negative ? static_cast<std::int64_t>(~v + 1) : static_cast<std::int64_t>(v);
    return true;
  }
  bool size(std::size_t& out) {
    std::uint64_t v = 0;
    if (!number(v) || v > std::numeric_limits<std::size_t>::max()) return false;
    out = static_cast<std::size_t>(v);
    return true;
  }
  bool identity(io::FileIdentity& id) {
    return number(id.dev) && number(id.ino) && signed_number(id.size) &&
           signed_number(id.mtime_ns) && signed_number(id.ctime_ns);
  }
  // 0 or [1-9][0-9]* below 2^64, up to the next ' ' or '\n'.
  bool digits(std::uint64_t& out) {
    std::size_t begin = p_;
    std::uint64_t v = 0;
    while (p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9') {
      std::uint64_t d = static_cast<std::uint64_t>(t_[p_] - '0');
      if (v > (std::numeric_limits<std::uint64_t>::max() - d) / 10) return false;
      v = v * 10 + d;
      ++p_;
    }
    std::size_t n = p_ - begin;
    if (n == 0 || (n > 1 && t_[begin] == '0')) return false;
    if (p_ < t_.size() && t_[p_] != ' ' && t_[p_] != '\n') return false;
    out = v;
    return true;
  }
  bool end_of_line() {
    if (p_ >= t_.size() || t_[p_] != '\n') return false;
    ++p_;
    return true;
  }

 private:
  std::string_view t_;
  std::size_t p_ = 0;
};

void put_identity(std::string& out, const io::FileIdentity& id) {
  out += ' ' + std::to_string(id.dev) + ' ' + std::to_string(id.ino) + ' ' +
         std::to_string(id.size) + ' ' + std::to_string(id.mtime_ns) + ' ' +
         std::to_string(id.ctime_ns);
}

bool is_record_name(std::string_view name) {
  return name.size() == 16 && std::all_of(name.begin(), name.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// Removes the least recently written records beyond kKeepScanRecords once there are more than
// kMaxScanRecords, and temporary files (<record>.tmp.<pid>.<n>) older than an hour: a writer
// that died. Best effort: what cannot be removed stays.
void prune_scan_records(int dir_fd) {
  io::UniqueFd fd(::dup(dir_fd));
  if (!fd) return;
  DIR* d = ::fdopendir(fd.get());
  if (!d) return;
  fd.release();  // the DIR owns it now
  struct Entry {
    std::int64_t mtime_ns;
    std::string name;
  };
  std::vector<Entry> records;
  std::vector<std::string> stale_tmp;
  const std::int64_t hour_ago = io::realtime_ns() - std::int64_t{3600} * 1'000'000'000;
  std::size_t seen = 0;
  while (dirent* e = ::readdir(d)) {
    if (++seen > io::limits::kMaxStoreEntries) break;  // a directory someone filled: leave it
    std::string_view name(e->d_name);
    bool record = is_record_name(name);
    bool tmp = name.size() > 21 && is_record_name(name.substr(0, 16)) &&
               name.substr(16, 5) == ".tmp.";
    if (!record && !tmp) continue;
    struct stat st {};
    if (::fstatat(dir_fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    const std::int64_t mtime = io::identity_of(st).mtime_ns;
    if (record)
      records.push_back({mtime, std::string(name)});
    else if (mtime < hour_ago)
      stale_tmp.emplace_back(name);
  }
  ::closedir(d);  // closes fd
  for (const auto& name : stale_tmp) ::unlinkat(dir_fd, name.c_str(), 0);
  if (records.size() <= kMaxScanRecords) return;
  std::sort(records.begin(), records.end(),
            [](const Entry& a, const Entry& b) { return a.mtime_ns < b.mtime_ns; });
  for (std::size_t i = 0; i + kKeepScanRecords < records.size(); ++i)
    ::unlinkat(dir_fd, records[i].name.c_str(), 0);
}

}  // namespace

std::string scan_record_path(std::string_view cache_dir, std::string_view package,
                             std::string_view store) {
  static const char* kHex = "0123456789abcdef";
  std::uint64_t h = fnv1a64(package, store);
  std::string path(cache_dir);
  if (path.empty() || path.back() != '/') path += '/';
  path += "scan/";
  for (int shift = 60; shift >= 0; shift -= 4) path += kHex[(h >> shift) & 0xf];
  return path;
}

std::optional<std::string> format_scan_record(const ScanRecord& r) {
  auto one_line = [](std::string_view s) {
    return !s.empty() && s.find('\n') == std::string_view::npos;
  };
  if (!one_line(r.package) || !one_line(r.store)) return std::nullopt;
  std::string out;
  out += kFirstLine;
  out += '\n' + writer_line();
  out += "\npackage " + r.package + "\nstore " + r.store + "\ndir";
  put_identity(out, r.dir);
  out += '\n';
  for (std::size_t i = 0; i < r.names.size(); ++i) {
    const std::string& n = r.names[i];
    if (!one_line(n) || n.find(' ') != std::string::npos || !is_archive_dir_name(n, r.package) ||
        (i > 0 && !(r.names[i - 1] < n)))
      return std::nullopt;
    out += "name " + n + '\n';
  }
  out += "end " + io::sha256_hex(out) + "\n";
  return out;
}

std::optional<ScanRecord> parse_scan_record(std::string_view text, std::string_view package,
                                            std::string_view store) {
  RecordReader r(text);
  ScanRecord out;
  std::string_view v;
  if (!r.line(kFirstLine) || !r.line(writer_line())) return std::nullopt;
  if (!r.keyword("package") || !r.rest(v) || v != package) return std::nullopt;
  if (!r.keyword("store") || !r.rest(v) || v != store) return std::nullopt;
  out.package = package;
  out.store = store;
  if (!r.keyword("dir") || !r.identity(out.dir) || !r.end_of_line()) return std::nullopt;
  while (r.keyword("name")) {
    if (!r.word(v) || !r.end_of_line() || !is_archive_dir_name(v, package)) return std::nullopt;
    if (!out.names.empty() && !(out.names.back() < v)) return std::nullopt;
    if (out.names.size() >= io::limits::kMaxStoreEntries) return std::nullopt;
    out.names.emplace_back(v);
  }
  const std::size_t digested = r.position();
  if (!r.keyword("end") || !r.word(v) || !r.end_of_line() || !r.at_end()) return std::nullopt;
  if (v != io::sha256_hex(text.substr(0, digested))) return std::nullopt;
  return out;
}

std::optional<ScanRecord> next_scan_record(const std::optional<ScanRecord>& on_disk,
                                           std::string_view package, std::string_view store,
                                           ScanLearned now) {
  const bool keep_names =
      now.dir_settled &&
      (now.listed_now ? !now.through_links : on_disk && on_disk->dir == now.dir);
  ScanRecord next;
  next.package = package;
  next.store = store;
  if (!keep_names) return std::nullopt;
  next.dir = now.dir;
  next.names = std::move(now.names);
  if (on_disk && next == *on_disk) return std::nullopt;
  return next;
}

std::optional<ScanRecord> read_scan_record(const std::string& path, std::string_view package,
                                           std::string_view store) {
  io::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd) return std::nullopt;
  struct stat st {};
  std::string text;
  bool ok = ::fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
            (st.st_mode & (S_IWGRP | S_IWOTH)) == 0 && st.st_size >= 0 &&
            static_cast<std::uint64_t>(st.st_size) <= kMaxScanRecordBytes;
  if (ok) {
    // One byte more than its size: a record that grew while read is refused, not cut.
    text.resize(static_cast<std::size_t>(st.st_size) + 1);
    ssize_t got = io::read_full(fd.get(), text.data(), text.size());
    ok = got == static_cast<ssize_t>(st.st_size);
    text.resize(ok ? static_cast<std::size_t>(got) : 0);
  }
  if (!ok) return std::nullopt;
  return parse_scan_record(text, package, store);
}

std::optional<std::string> write_scan_record(const std::string& path, const ScanRecord& record) {
  namespace fs = std::filesystem;
  std::optional<std::string> text = format_scan_record(record);
  if (!text)
    return std::string("the record cannot be written (a name that does not fit one line, or ") +
           "names not sorted)";
  const fs::path file(path);
  const fs::path dir = file.parent_path();
  const fs::path cache = dir.parent_path();
  std::error_code ec;
  fs::create_directories(cache, ec);
  // Everything below is relative to directory descriptors checked once (no path is looked up
  // twice): the cache directory must be this user's, scan/ this user's alone and no link.
  io::UniqueFd cache_fd(::open(cache.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  struct stat st {};
  if (!cache_fd || ::fstat(cache_fd.get(), &st) != 0)
    return "cannot open " + cache.string() + ": " + std::strerror(errno);
  if (st.st_uid != ::geteuid()) return cache.string() + " is not owned by this user";
  const std::string scan = dir.filename().string(), name = file.filename().string();
  if (::mkdirat(cache_fd.get(), scan.c_str(), 0700) != 0 && errno != EEXIST)
    return "cannot create " + dir.string() + ": " + std::strerror(errno);
  io::UniqueFd dir_fd(
      ::openat(cache_fd.get(), scan.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir_fd || ::fstat(dir_fd.get(), &st) != 0)
    return "cannot open " + dir.string() + " (a directory, not a link): " + std::strerror(errno);
  if (st.st_uid != ::geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return dir.string() + " is not this user's alone (owner, or writable by others)";
  // A name no other writer picks: pid and 64 random bits (a container's pid 1 is every run's).
  std::uint64_t nonce = 0;
  if (::getrandom(&nonce, sizeof nonce, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof nonce))
    nonce = static_cast<std::uint64_t>(io::realtime_ns());
  char suffix[40];
  std::snprintf(suffix, sizeof suffix, ".tmp.%ld.%016llx", static_cast<long>(::getpid()),
                static_cast<unsigned long long>(nonce));
  const std::string tmp = name + suffix;
  io::UniqueFd fd(::openat(dir_fd.get(), tmp.c_str(),
                       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) return "cannot create " + (dir / tmp).string() + ": " + std::strerror(errno);
  int err = io::write_all(fd.get(), *text) ? 0 : errno;
  if (fd.close() != 0 && err == 0) err = errno;
  if (err == 0 && ::renameat(dir_fd.get(), tmp.c_str(), dir_fd.get(), name.c_str()) != 0)
    err = errno;
  if (err != 0) {
    ::unlinkat(dir_fd.get(), tmp.c_str(), 0);
    return "cannot write " + path + ": " + std::strerror(err);
  }
  prune_scan_records(dir_fd.get());
  return std::nullopt;
}

}  // namespace kiln::store
