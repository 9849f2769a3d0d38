#include "format/archive.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <vector>

#include "format/archive_stream.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "runtime/lazy_libs.hpp"

namespace kiln::format {

static_assert(kMaxArchiveBytes == io::limits::kMaxUnpackedBytes,
              "archive.hpp and limits.hpp state one limit");

namespace {

namespace fs = std::filesystem;
using runtime::lazy_libs::ArchiveApi;

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

  const ArchiveApi& la = runtime::lazy_libs::archive("writing the archive " + out.string());
  TempOutput tmp(out);
  runtime::lazy_libs::WriteHandle a(la.write_new(), {&la});
  if (!a) throw Error(ErrorKind::Internal, "libarchive: archive_write_new failed");
  // libarchive's words ("Write error"), then the system's when a call of its failed.
  auto why = [&] {
    int err = la.error_number(a.get());
    return la.error_text(a.get()) + (err > 0 ? std::string(": ") + std::strerror(err) : "");
  };
  auto check = [&](int r, const char* what) {
    if (r != ARCHIVE_OK)
      throw Error(ErrorKind::Io, "cannot write " + out.string() + ": " + what + ": " + why());
  };
  // pax_restricted writes plain ustar headers unless a name needs an extension, and never
  // atime/ctime: the bytes depend only on the members and mtime_epoch.
  check(la.write_set_format_pax_restricted(a.get()), "set tar format");
  check(la.write_add_filter_zstd(a.get()), "add zstd filter");
  std::string level = std::to_string(zstd_level);
  check(la.write_set_filter_option(a.get(), "zstd", "compression-level", level.c_str()),
        "set zstd compression level");
  check(la.write_open_fd(a.get(), tmp.fd()), "open");

  for (const auto& m : members) {
    runtime::lazy_libs::EntryHandle e(la.entry_new(), {&la});
    if (!e) throw Error(ErrorKind::Internal, "libarchive: archive_entry_new failed");
    la.entry_set_pathname(e.get(), m.name.c_str());
    la.entry_set_filetype(e.get(), AE_IFREG);
    la.entry_set_perm(e.get(), 0644);
    la.entry_set_size(e.get(), static_cast<la_int64_t>(m.data.size()));
    la.entry_set_mtime(e.get(), static_cast<time_t>(mtime_epoch), 0);
    la.entry_set_uid(e.get(), 0);
    la.entry_set_gid(e.get(), 0);
    la.entry_set_uname(e.get(), "root");
    la.entry_set_gname(e.get(), "root");
    check(la.write_header(a.get(), e.get()), ("header of " + m.name).c_str());
    size_t off = 0;
    while (off < m.data.size()) {
      la_ssize_t n = la.write_data(a.get(), m.data.data() + off, m.data.size() - off);
      if (n <= 0)
        throw Error(ErrorKind::Io,
                    "cannot write " + out.string() + ": data of " + m.name + ": " + why());
      off += static_cast<size_t>(n);
    }
    check(la.write_finish_entry(a.get()), ("end of " + m.name).c_str());
  }
  check(la.write_close(a.get()), "close");
  tmp.commit();
}

struct ArchiveStream::Impl {
  const ArchiveApi* la = nullptr;
  runtime::lazy_libs::ReadHandle a;
  std::string origin;
  ArchiveLimits limits;
  int fd = -1;
  io::Sha256* raw_hash = nullptr;
  std::vector<char> raw_buf;
  std::set<std::string> seen;
  std::uint64_t members = 0;
  std::uint64_t total = 0;  // declared sizes of the members so far
  std::optional<ArchiveMemberHeader> current;
  bool data_read = false;
  bool eof = false;

  ~Impl() {
    a.reset();
    if (fd >= 0) ::close(fd);
  }

  [[noreturn]] void refuse(const std::string& name, const std::string& why) const {
    throw Error(ErrorKind::Format, "archive " + origin + ": entry '" + name + "' refused: " + why);
  }
  [[noreturn]] void over_limit(const std::string& name, const std::string& what,
                               std::uint64_t found, std::uint64_t limit) const {
    throw Error(ErrorKind::Limit, "archive " + origin + ": member '" + name + "': " + what + " " +
                                      std::to_string(found) + " exceeds the limit of " +
                                      std::to_string(limit) + " (docs/security.md)");
  }

  static la_ssize_t read_cb(struct archive*, void* self, const void** buf) {
    auto* im = static_cast<Impl*>(self);
    for (;;) {
      ssize_t n = ::read(im->fd, im->raw_buf.data(), im->raw_buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        im->la->set_error(im->a.get(), errno, "read failed: %s", std::strerror(errno));
        return -1;
      }
      if (n > 0 && im->raw_hash) im->raw_hash->update(im->raw_buf.data(), static_cast<size_t>(n));
      *buf = im->raw_buf.data();
      return n;
    }
  }
};

namespace {

runtime::lazy_libs::ReadHandle new_reader(const ArchiveApi& la) {
  runtime::lazy_libs::ReadHandle a(la.read_new(), {&la});
  if (!a) throw Error(ErrorKind::Internal, "libarchive: archive_read_new failed");
  // Only zstd-compressed (or plain) tar: no other filter or format is ever probed.
  if (la.read_support_filter_zstd(a.get()) != ARCHIVE_OK ||
      la.read_support_format_tar(a.get()) != ARCHIVE_OK)
    throw Error(ErrorKind::Internal,
                "libarchive cannot read zstd-compressed tar here: " + la.error_text(a.get()));
  return a;
}

}  // namespace

ArchiveStream::ArchiveStream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ArchiveStream::ArchiveStream(ArchiveStream&&) noexcept = default;
ArchiveStream& ArchiveStream::operator=(ArchiveStream&&) noexcept = default;
ArchiveStream::~ArchiveStream() = default;
const std::string& ArchiveStream::origin() const { return impl_->origin; }

ArchiveStream ArchiveStream::open_file(const fs::path& path, ArchiveLimits limits,
                                       io::Sha256* raw_hash) {
  auto im = std::make_unique<Impl>();
  im->origin = path.string();
  im->limits = limits;
  im->raw_hash = raw_hash;
  // O_NONBLOCK: a FIFO must not block the open; it is refused below.
  im->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (im->fd < 0) {
    if (errno == ENOENT) throw Error(ErrorKind::NotFound, "archive not found: " + im->origin);
    throw Error(ErrorKind::Io, "cannot open archive " + im->origin + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(im->fd, &st) != 0 || !S_ISREG(st.st_mode))
    throw Error(ErrorKind::Io, "not a regular file: " + im->origin);
  im->raw_buf.resize(1 << 16);
  im->la = &runtime::lazy_libs::archive("unpacking " + im->origin);
  im->a = new_reader(*im->la);
  if (im->la->read_open(im->a.get(), im.get(), nullptr, &Impl::read_cb, nullptr) != ARCHIVE_OK) {
    int err = im->la->error_number(im->a.get());
    // An unreadable file is I/O; bytes libarchive does not recognise are a format problem.
    ErrorKind kind =
        (err == EACCES || err == EIO || err == EISDIR) ? ErrorKind::Io : ErrorKind::Format;
    throw Error(kind, "cannot open archive " + im->origin + ": " + im->la->error_text(im->a.get()));
  }
  return ArchiveStream(std::move(im));
}

ArchiveStream ArchiveStream::open_memory(std::string_view bytes, const std::string& origin,
                                         ArchiveLimits limits) {
  auto im = std::make_unique<Impl>();
  im->la = &runtime::lazy_libs::archive("unpacking " + origin);
  im->origin = origin;
  im->limits = limits;
  im->a = new_reader(*im->la);
  if (im->la->read_open_memory(im->a.get(), bytes.data(), bytes.size()) != ARCHIVE_OK)
    throw Error(ErrorKind::Format,
                "cannot open archive " + origin + ": " + im->la->error_text(im->a.get()));
  return ArchiveStream(std::move(im));
}

std::optional<ArchiveMemberHeader> ArchiveStream::next() {
  Impl& im = *impl_;
  const ArchiveApi& la = *im.la;
  if (im.eof) return std::nullopt;
  im.current.reset();
  archive_entry* e = nullptr;
  int r = la.read_next_header(im.a.get(), &e);  // skips unread data of the previous one
  if (r == ARCHIVE_EOF) {
    im.eof = true;
    return std::nullopt;
  }
  if (r != ARCHIVE_OK)
    throw Error(ErrorKind::Format, "archive " + im.origin + ": bad entry header after " +
                                       std::to_string(im.members) +
                                       " members: " + la.error_text(im.a.get()));
  const char* raw = la.entry_pathname(e);
  std::string name = raw ? raw : "";
  if (++im.members > im.limits.max_members)
    im.over_limit(name, "member count", im.members, im.limits.max_members);
  if (name.empty()) im.refuse(name, "empty name");
  if (name[0] == '/') im.refuse(name, "absolute path");
  if (name == ".." || name.rfind("../", 0) == 0 || name.find("/../") != std::string::npos ||
      (name.size() >= 3 && name.compare(name.size() - 3, 3, "/..") == 0))
    im.refuse(name, "path contains '..'");
  if (la.entry_hardlink(e)) im.refuse(name, "hard link");
  if (la.entry_symlink(e) || la.entry_filetype(e) == AE_IFLNK) im.refuse(name, "symbolic link");
  if (la.entry_filetype(e) == AE_IFDIR)
    im.refuse(name, "directory (archives hold plain files only)");
  if (la.entry_filetype(e) != AE_IFREG)
    im.refuse(name, "not a regular file (device, fifo or socket)");
  if (!is_plain_member_name(name))
    im.refuse(name, "name contains '/' (archives hold no directories)");
  if (!im.seen.insert(name).second) im.refuse(name, "appears twice");
  if (!la.entry_size_is_set(e) || la.entry_size(e) < 0) im.refuse(name, "size not recorded");
  auto declared = static_cast<std::uint64_t>(la.entry_size(e));
  if (declared > im.limits.max_member_bytes)
    im.over_limit(name, "declared size", declared, im.limits.max_member_bytes);
  if (im.total + declared > im.limits.max_total_bytes)
    im.over_limit(name, "total unpacked size", im.total + declared, im.limits.max_total_bytes);
  im.total += declared;
  im.current = ArchiveMemberHeader{name, declared};
  im.data_read = false;
  return im.current;
}

void ArchiveStream::read_data(const std::function<void(const char*, std::size_t)>& sink) {
  Impl& im = *impl_;
  if (!im.current || im.data_read)
    throw Error(ErrorKind::Internal, "archive " + im.origin + ": no member data to read");
  im.data_read = true;
  const ArchiveMemberHeader& h = *im.current;
  std::uint64_t got = 0;
  char buf[1 << 16];
  for (;;) {
    la_ssize_t n = im.la->read_data(im.a.get(), buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) im.refuse(h.name, "cannot read data: " + im.la->error_text(im.a.get()));
    got += static_cast<std::uint64_t>(n);
    // libarchive stops at the header's size; this guards the promise, not the common case.
    if (got > h.size)
      im.refuse(h.name, "holds more than the " + std::to_string(h.size) + " bytes its header says");
    sink(buf, static_cast<std::size_t>(n));
  }
  if (got != h.size)
    im.refuse(h.name,
              "holds " + std::to_string(got) + " bytes, header says " + std::to_string(h.size));
}

std::string ArchiveStream::read_data_whole(std::uint64_t max_bytes) {
  Impl& im = *impl_;
  if (im.current && im.current->size > max_bytes)
    im.over_limit(im.current->name, "size", im.current->size, max_bytes);
  std::string out;
  if (im.current) out.reserve(static_cast<std::size_t>(im.current->size));
  read_data([&](const char* p, std::size_t n) { out.append(p, n); });
  return out;
}

void ArchiveStream::finish() {
  Impl& im = *impl_;
  if (im.la->read_close(im.a.get()) != ARCHIVE_OK)
    throw Error(ErrorKind::Format, "archive " + im.origin + ": " + im.la->error_text(im.a.get()));
  // Trailing bytes after the tar end still belong to the file its digest covers.
  if (im.fd >= 0 && im.raw_hash) {
    for (;;) {
      ssize_t n = ::read(im.fd, im.raw_buf.data(), im.raw_buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0)
        throw Error(ErrorKind::Io, "cannot read " + im.origin + ": " + std::strerror(errno));
      if (n == 0) break;
      im.raw_hash->update(im.raw_buf.data(), static_cast<size_t>(n));
    }
  }
}

namespace {

std::vector<ArchiveMember> read_all(ArchiveStream r) {
  std::vector<ArchiveMember> out;
  while (auto h = r.next()) out.push_back({h->name, r.read_data_whole(h->size)});
  r.finish();
  return out;
}

ArchiveLimits total_limit(std::uint64_t max_total_bytes) {
  ArchiveLimits l;
  l.max_total_bytes = max_total_bytes;
  l.max_member_bytes = std::min(l.max_member_bytes, max_total_bytes);
  return l;
}

}  // namespace

std::vector<ArchiveMember> read_archive(const fs::path& archive) {
  return read_archive(archive, kMaxArchiveBytes);
}

std::vector<ArchiveMember> read_archive(const fs::path& archive, std::uint64_t max_total_bytes) {
  return read_all(ArchiveStream::open_file(archive, total_limit(max_total_bytes)));
}

std::vector<ArchiveMember> read_archive_bytes(std::string_view bytes, const std::string& origin,
                                              std::uint64_t max_total_bytes) {
  return read_all(ArchiveStream::open_memory(bytes, origin, total_limit(max_total_bytes)));
}

}  // namespace kiln::format
