#include "kiln/archive.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <random>
#include <set>

#include "kiln/error.hpp"
#include "libarchive_handles.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// Removes the temp file unless committed, so a failed write leaves nothing behind.
class TempOutput {
 public:
  explicit TempOutput(const fs::path& final_path) : final_(final_path) {
    std::random_device rd;
    static const char* alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
    for (int attempt = 0; attempt < 100; ++attempt) {
      std::string suffix;
      for (int i = 0; i < 8; ++i) suffix += alphabet[rd() % 36];
      path_ = final_.string() + ".tmp." + suffix;
      fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd_ >= 0) return;
      if (errno != EEXIST) break;
    }
    throw Error(ErrorKind::Io, "cannot create a temporary file beside " + final_.string() + ": " +
                                   std::strerror(errno));
  }
  ~TempOutput() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(path_.c_str());
  }
  TempOutput(const TempOutput&) = delete;
  TempOutput& operator=(const TempOutput&) = delete;
  int fd() const { return fd_; }
  void commit() {
    if (::fsync(fd_) != 0 || ::close(fd_) != 0) {
      fd_ = -1;
      throw Error(ErrorKind::Io, "cannot write " + path_.string() + ": " + std::strerror(errno));
    }
    fd_ = -1;
    if (::rename(path_.c_str(), final_.c_str()) != 0)
      throw Error(ErrorKind::Io, "cannot rename " + path_.string() + " to " + final_.string() +
                                     ": " + std::strerror(errno));
    committed_ = true;
  }

 private:
  fs::path final_;
  fs::path path_;
  int fd_ = -1;
  bool committed_ = false;
};

bool is_plain_member_name(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos &&
         s.find('\\') == std::string::npos && s.find('\0') == std::string::npos;
}

}  // namespace

void write_archive(const fs::path& out, const std::vector<ArchiveMember>& members,
                   std::int64_t mtime_epoch, int zstd_level) {
  std::set<std::string> seen;
  for (const auto& m : members) {
    if (!is_plain_member_name(m.name))
      throw Error(ErrorKind::Usage, "cannot write " + out.string() + ": member name '" + m.name +
                                        "' is not a plain file name");
    if (!seen.insert(m.name).second)
      throw Error(ErrorKind::Usage,
                  "cannot write " + out.string() + ": member '" + m.name + "' appears twice");
  }
  if (zstd_level < 1 || zstd_level > 22)
    throw Error(ErrorKind::Usage, "zstd level must be 1..22, got " + std::to_string(zstd_level));

  TempOutput tmp(out);
  std::unique_ptr<struct archive, ArchiveWriteFree> a(archive_write_new());
  if (!a) throw Error(ErrorKind::Internal, "libarchive: archive_write_new failed");
  auto check = [&](int r, const char* what) {
    if (r != ARCHIVE_OK)
      throw Error(ErrorKind::Io,
                  "cannot write " + out.string() + ": " + what + ": " + la_error(a.get()));
  };
  // pax_restricted writes plain ustar headers unless a name needs an extension, and never
  // atime/ctime: the bytes depend only on the members and mtime_epoch.
  check(archive_write_set_format_pax_restricted(a.get()), "set tar format");
  check(archive_write_add_filter_zstd(a.get()), "add zstd filter");
  std::string level = std::to_string(zstd_level);
  check(archive_write_set_filter_option(a.get(), "zstd", "compression-level", level.c_str()),
        "set zstd compression level");
  check(archive_write_open_fd(a.get(), tmp.fd()), "open");

  for (const auto& m : members) {
    std::unique_ptr<archive_entry, EntryFree> e(archive_entry_new());
    if (!e) throw Error(ErrorKind::Internal, "libarchive: archive_entry_new failed");
    archive_entry_set_pathname(e.get(), m.name.c_str());
    archive_entry_set_filetype(e.get(), AE_IFREG);
    archive_entry_set_perm(e.get(), 0644);
    archive_entry_set_size(e.get(), static_cast<la_int64_t>(m.data.size()));
    archive_entry_set_mtime(e.get(), static_cast<time_t>(mtime_epoch), 0);
    archive_entry_set_uid(e.get(), 0);
    archive_entry_set_gid(e.get(), 0);
    archive_entry_set_uname(e.get(), "root");
    archive_entry_set_gname(e.get(), "root");
    check(archive_write_header(a.get(), e.get()), ("header of " + m.name).c_str());
    size_t off = 0;
    while (off < m.data.size()) {
      la_ssize_t n = archive_write_data(a.get(), m.data.data() + off, m.data.size() - off);
      if (n <= 0)
        throw Error(ErrorKind::Io, "cannot write " + out.string() + ": data of " + m.name + ": " +
                                       la_error(a.get()));
      off += static_cast<size_t>(n);
    }
    check(archive_write_finish_entry(a.get()), ("end of " + m.name).c_str());
  }
  check(archive_write_close(a.get()), "close");
  tmp.commit();
}

std::vector<ArchiveMember> read_archive(const fs::path& archive) {
  return read_archive(archive, kMaxArchiveBytes);
}

namespace {

std::vector<ArchiveMember> read_members(struct archive* a, const std::string& where,
                                        std::uint64_t max_total_bytes);

std::unique_ptr<struct archive, ArchiveReadFree> new_reader() {
  std::unique_ptr<struct archive, ArchiveReadFree> a(archive_read_new());
  if (!a) throw Error(ErrorKind::Internal, "libarchive: archive_read_new failed");
  // Only zstd-compressed (or plain) tar: no other filter or format is ever probed.
  if (archive_read_support_filter_zstd(a.get()) != ARCHIVE_OK ||
      archive_read_support_format_tar(a.get()) != ARCHIVE_OK)
    throw Error(ErrorKind::Internal,
                "libarchive cannot read zstd-compressed tar here: " + la_error(a.get()));
  return a;
}

}  // namespace

std::vector<ArchiveMember> read_archive(const fs::path& archive, std::uint64_t max_total_bytes) {
  const std::string where = archive.string();
  std::error_code ec;
  if (!fs::exists(archive, ec)) throw Error(ErrorKind::NotFound, "archive not found: " + where);
  if (!fs::is_regular_file(archive, ec)) throw Error(ErrorKind::Io, "not a regular file: " + where);
  auto a = new_reader();
  if (archive_read_open_filename(a.get(), archive.c_str(), 1 << 16) != ARCHIVE_OK) {
    int err = archive_errno(a.get());
    // An unreadable file is I/O; bytes libarchive does not recognise are a format problem.
    ErrorKind kind =
        (err == EACCES || err == EIO || err == EISDIR) ? ErrorKind::Io : ErrorKind::Format;
    throw Error(kind, "cannot open archive " + where + ": " + la_error(a.get()));
  }
  return read_members(a.get(), where, max_total_bytes);
}

std::vector<ArchiveMember> read_archive_bytes(std::string_view bytes, const std::string& origin,
                                              std::uint64_t max_total_bytes) {
  auto a = new_reader();
  if (archive_read_open_memory(a.get(), bytes.data(), bytes.size()) != ARCHIVE_OK)
    throw Error(ErrorKind::Format, "cannot open archive " + origin + ": " + la_error(a.get()));
  return read_members(a.get(), origin, max_total_bytes);
}

namespace {

std::vector<ArchiveMember> read_members(struct archive* a, const std::string& where,
                                        std::uint64_t max_total_bytes) {
  std::vector<ArchiveMember> out;
  std::set<std::string> seen;
  std::uint64_t total = 0;
  for (;;) {
    archive_entry* e = nullptr;
    int r = archive_read_next_header(a, &e);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK)
      throw Error(ErrorKind::Format, "archive " + where + ": bad entry header after " +
                                         std::to_string(out.size()) + " members: " + la_error(a));
    const char* raw = archive_entry_pathname(e);
    std::string name = raw ? raw : "";
    auto refuse = [&](const std::string& why) {
      throw Error(ErrorKind::Format, "archive " + where + ": entry '" + name + "' refused: " + why);
    };
    if (name.empty()) refuse("empty name");
    if (name[0] == '/') refuse("absolute path");
    if (name == ".." || name.rfind("../", 0) == 0 || name.find("/../") != std::string::npos ||
        (name.size() >= 3 && name.compare(name.size() - 3, 3, "/..") == 0))
      refuse("path contains '..'");
    if (archive_entry_hardlink(e)) refuse("hard link");
    if (archive_entry_symlink(e) || archive_entry_filetype(e) == AE_IFLNK) refuse("symbolic link");
    if (archive_entry_filetype(e) == AE_IFDIR) refuse("directory (archives hold plain files only)");
    if (archive_entry_filetype(e) != AE_IFREG)
      refuse("not a regular file (device, fifo or socket)");
    if (!is_plain_member_name(name)) refuse("name contains '/' (archives hold no directories)");
    if (!seen.insert(name).second) refuse("appears twice");
    if (!archive_entry_size_is_set(e) || archive_entry_size(e) < 0) refuse("size not recorded");
    auto declared = static_cast<std::uint64_t>(archive_entry_size(e));
    if (declared > max_total_bytes || total + declared > max_total_bytes)
      refuse("members would exceed the limit of " + std::to_string(max_total_bytes) + " bytes");

    ArchiveMember m;
    m.name = name;
    m.data.reserve(static_cast<size_t>(declared));
    char buf[1 << 16];
    for (;;) {
      la_ssize_t n = archive_read_data(a, buf, sizeof buf);
      if (n == 0) break;
      if (n < 0) refuse("cannot read data: " + la_error(a));
      total += static_cast<std::uint64_t>(n);
      if (total > max_total_bytes)
        refuse("members exceed the limit of " + std::to_string(max_total_bytes) + " bytes");
      m.data.append(buf, static_cast<size_t>(n));
    }
    if (m.data.size() != declared)
      refuse("holds " + std::to_string(m.data.size()) + " bytes, header says " +
             std::to_string(declared));
    out.push_back(std::move(m));
  }
  if (archive_read_close(a) != ARCHIVE_OK)
    throw Error(ErrorKind::Format, "archive " + where + ": " + la_error(a));
  return out;
}

}  // namespace

}  // namespace kiln
