// The one store scanning rule (store_scan.hpp).
#include "store/store_scan.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <system_error>

#include "io/file_descriptor.hpp"
#include "io/limits.hpp"
#include "kiln/error.hpp"

namespace kiln::store {

namespace fs = std::filesystem;

bool is_archive_dir_name(std::string_view name, std::string_view package) {
  std::optional<std::string_view> pkg = format::release_name_package(name);
  return pkg && (package.empty() || *pkg == package);
}

std::optional<format::Target> archive_dir_target(std::string_view name) {
  const auto dash = name.rfind('-');
  if (dash == std::string_view::npos) return std::nullopt;
  return format::parse_target(name.substr(dash + 1));
}

StoreListing list_store_archive_dirs(const fs::path& store, std::string_view package) {
  // POSIX calls, not std::filesystem: a fresh process's first get() lists a store, and this is
  // one open, one or two getdents64 and no allocation per entry that is not an archive.
  StoreListing out;
  io::UniqueFd fd(::open(store.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) {
    int err = errno;
    out.status = err == ENOENT    ? ListingStatus::Absent
                 : err == ENOTDIR ? ListingStatus::NotADirectory
                                  : ListingStatus::Unlistable;
    out.problem = err == ENOENT    ? "does not exist"
                  : err == ENOTDIR ? "not a directory"
                                   : "cannot be listed: " + std::generic_category().message(err);
    return out;
  }
  auto refuse = [&](std::string problem) {
    out.problem = std::move(problem);
    out.archive_names.clear();
    return out;
  };
  alignas(8) char buf[8192];
  std::uint64_t entries = 0;
  for (;;) {
    long n = ::syscall(SYS_getdents64, fd.get(), buf, sizeof buf);
    if (n < 0) return refuse("cannot be listed: " + std::generic_category().message(errno));
    if (n == 0) break;
    for (long off = 0; off < n;) {
      // struct linux_dirent64: d_ino, d_off, d_reclen, d_type, d_name (NUL-terminated).
      const char* rec = buf + off;
      unsigned short reclen = 0;
      std::memcpy(&reclen, rec + offsetof(struct dirent64, d_reclen), sizeof reclen);
      unsigned char type = static_cast<unsigned char>(rec[offsetof(struct dirent64, d_type)]);
      const char* name = rec + offsetof(struct dirent64, d_name);
      off += reclen;
      if (std::strcmp(name, ".") == 0 || std::strcmp(name, "..") == 0) continue;
      if (++entries > io::limits::kMaxStoreEntries)
        return refuse("cannot be listed: it holds more than " +
                      std::to_string(io::limits::kMaxStoreEntries) +
                      " entries, the limit (docs/security.md)");
      if (!is_archive_dir_name(name, package)) continue;
      bool dir = type == DT_DIR;
      if (type == DT_LNK || type == DT_UNKNOWN) {  // a link to a directory counts (followed)
        out.through_links = true;
        struct stat st {};
        dir = ::fstatat(fd.get(), name, &st, 0) == 0 && S_ISDIR(st.st_mode);
      }
      if (dir) out.archive_names.emplace_back(name);
    }
  }
  std::sort(out.archive_names.begin(), out.archive_names.end());
  out.status = ListingStatus::Listed;
  return out;
}

void require_archive_dir_name(std::string_view dir, const format::Manifest& m) {
  std::string stem = format::archive_stem(m.package, m.package_version, m.cuda_version, m.target);
  // The last component, as fs::path::filename() gives it ("" after a trailing '/').
  std::string_view name = dir.substr(dir.rfind('/') + 1);
  if (name == stem) return;
  throw Error(ErrorKind::Format,
              std::string(dir) + ": directory name does not match its manifest (expected '" + stem +
                  "' from package, package_version, cuda_version and target)");
}

}  // namespace kiln::store
