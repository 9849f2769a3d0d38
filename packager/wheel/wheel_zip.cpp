// Zip I/O for wheels through libarchive: reproducible bytes (sorted names, fixed UTC DOS
// times, mode 0644) on write, regular files only on read (wheel.hpp: write_zip, read_zip).
#include <archive.h>
#include <archive_entry.h>

#include <cstring>
#include <ctime>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "format/libarchive_handles.hpp"
#include "io/atomic_file.hpp"
#include "kiln/error.hpp"
#include "wheel/wheel.hpp"
#include "wheel/wheel_paths.hpp"

namespace kiln::wheel {
namespace fs = std::filesystem;

namespace {

// The latest time a DOS timestamp holds: 2107-12-31T23:59:58Z.
constexpr std::int64_t kZipEpochMax = 4354819198;

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

}  // namespace

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
    std::unique_ptr<struct archive, format::ArchiveWriteFree> a(archive_write_new());
    if (!a) throw Error(ErrorKind::Internal, "libarchive: archive_write_new failed");
    auto check = [&](int r, const std::string& what) {
      if (r != ARCHIVE_OK)
        throw Error(ErrorKind::Io,
                    "cannot write " + out.string() + ": " + what + ": " + format::la_error(a.get()));
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
      std::unique_ptr<archive_entry, format::EntryFree> e(archive_entry_new());
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
                                         format::la_error(a.get()));
        off += static_cast<std::size_t>(n);
      }
      check(archive_write_finish_entry(a.get()), "end of " + f.path);
    }
    check(archive_write_close(a.get()), "close");
  }
  set_dos_times(bytes, dos_time_utc(mtime), files.size());

  io::AtomicFile file(out);
  file.write(bytes);
  file.commit();
  return bytes;
}

std::vector<WheelFile> read_zip(const fs::path& zip) {
  const std::string where = zip.string();
  std::string bytes = io::read_whole_file(zip);
  std::unique_ptr<struct archive, format::ArchiveReadFree> a(archive_read_new());
  if (!a) throw Error(ErrorKind::Internal, "libarchive: archive_read_new failed");
  // The central directory, as pip and zipfile read it, not the local headers.
  if (archive_read_support_format_zip_seekable(a.get()) != ARCHIVE_OK)
    throw Error(ErrorKind::Internal, "libarchive cannot read zip here: " + format::la_error(a.get()));
  if (archive_read_open_memory(a.get(), bytes.data(), bytes.size()) != ARCHIVE_OK)
    throw Error(ErrorKind::Format, "cannot open " + where + " as a zip: " + format::la_error(a.get()));
  std::vector<WheelFile> out;
  std::uint64_t total = 0;
  for (;;) {
    archive_entry* e = nullptr;
    int r = archive_read_next_header(a.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK)
      throw Error(ErrorKind::Format, where + ": bad zip entry after " + std::to_string(out.size()) +
                                         " files: " + format::la_error(a.get()));
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
                    where + ": cannot read entry '" + name + "': " + format::la_error(a.get()));
      total += static_cast<std::uint64_t>(n);
      if (total > format::kMaxArchiveBytes)
        throw Error(ErrorKind::Format, where + ": files exceed the limit of " +
                                           std::to_string(format::kMaxArchiveBytes) + " bytes");
      f.data.append(buf, static_cast<std::size_t>(n));
    }
    out.push_back(std::move(f));
  }
  if (archive_read_close(a.get()) != ARCHIVE_OK)
    throw Error(ErrorKind::Format, where + ": " + format::la_error(a.get()));
  return out;
}

}  // namespace kiln::wheel
