#pragma once
// Owning handles for libarchive objects and its error text, for code that only the CLI runs and
// that links libarchive directly (the packager's wheel_zip.cpp and tarball.cpp). Code in libkiln
// (archive.cpp, index_entry_check.cpp) must not use these: it calls libarchive through the
// table lazy_libs.hpp loads on first use, so that libkiln.so does not need libarchive.
// Internal: public headers never include libarchive.
#include <archive.h>
#include <archive_entry.h>

#include <memory>
#include <string>

namespace kiln::format {

struct ArchiveWriteFree {
  void operator()(struct archive* a) const { archive_write_free(a); }
};
struct ArchiveReadFree {
  void operator()(struct archive* a) const { archive_read_free(a); }
};
struct EntryFree {
  void operator()(archive_entry* e) const { archive_entry_free(e); }
};
using ArchiveWriter = std::unique_ptr<struct archive, ArchiveWriteFree>;
using ArchiveReader = std::unique_ptr<struct archive, ArchiveReadFree>;
using ArchiveEntryPtr = std::unique_ptr<archive_entry, EntryFree>;

inline std::string la_error(struct archive* a) {
  const char* s = archive_error_string(a);
  return s ? s : "unknown libarchive error";
}

}  // namespace kiln::format
