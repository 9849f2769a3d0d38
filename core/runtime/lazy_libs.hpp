#pragma once
// libcurl and libarchive, loaded when first needed instead of linked: loading from a local
// store needs neither, so libkiln.so has no NEEDED entry for them (and none of the ~35
// libraries they bring: LDAP, Kerberos, SSH, libxml2, ICU). Every call that code in libkiln
// makes into them goes through one of the tables below, filled once per process by dlopen of
// the SONAME CMake found at configure time (never guessed) and dlsym of the whole symbol set
// at once, so a partial or too old library fails up front, naming every symbol it lacks (but
// libcurl's URL API, which only redirects need: KILN_LAZY_CURL_URL_SYMBOLS).
// Internal: public headers never include curl or libarchive. Code that only the CLI runs
// (packager/: tarball and wheel writers) links libarchive directly (libarchive_handles.hpp).
#include <archive.h>
#include <archive_entry.h>
#include <curl/curl.h>

#include <memory>
#include <optional>
#include <string>

namespace kiln::runtime::lazy_libs {

enum class Library { Curl, Archive };

// field name, libcurl symbol: every libcurl function libkiln calls.
#define KILN_LAZY_CURL_SYMBOLS(X)      \
  X(global_init, curl_global_init)     \
  X(easy_init, curl_easy_init)         \
  X(easy_cleanup, curl_easy_cleanup)   \
  X(easy_setopt, curl_easy_setopt)     \
  X(easy_getinfo, curl_easy_getinfo)   \
  X(easy_perform, curl_easy_perform)   \
  X(easy_strerror, curl_easy_strerror) \
  X(free, curl_free)                   \
  X(getdate, curl_getdate)

// field name, libcurl symbol: libcurl's URL API (7.62 and later), with which redirects are
// checked. A libcurl without it (RHEL 8's 7.61) still loads: these stay null
// (CurlApi::has_url_api), and every redirect is refused, saying why (http_transport.cpp).
#define KILN_LAZY_CURL_URL_SYMBOLS(X) \
  X(url, curl_url)                    \
  X(url_cleanup, curl_url_cleanup)    \
  X(url_get, curl_url_get)            \
  X(url_set, curl_url_set)

// field name, libarchive symbol: every libarchive function libkiln calls.
#define KILN_LAZY_ARCHIVE_SYMBOLS(X)                                          \
  X(read_new, archive_read_new)                                               \
  X(read_free, archive_read_free)                                             \
  X(read_support_filter_zstd, archive_read_support_filter_zstd)               \
  X(read_support_format_tar, archive_read_support_format_tar)                 \
  X(read_open, archive_read_open)                                             \
  X(read_open_memory, archive_read_open_memory)                               \
  X(read_open_filename, archive_read_open_filename)                           \
  X(read_next_header, archive_read_next_header)                               \
  X(read_data, archive_read_data)                                             \
  X(read_close, archive_read_close)                                           \
  X(error_number, archive_errno)                                              \
  X(error_string, archive_error_string)                                       \
  X(set_error, archive_set_error)                                             \
  X(write_new, archive_write_new)                                             \
  X(write_free, archive_write_free)                                           \
  X(write_set_format_pax_restricted, archive_write_set_format_pax_restricted) \
  X(write_add_filter_zstd, archive_write_add_filter_zstd)                     \
  X(write_set_filter_option, archive_write_set_filter_option)                 \
  X(write_open_fd, archive_write_open_fd)                                     \
  X(write_header, archive_write_header)                                       \
  X(write_data, archive_write_data)                                           \
  X(write_finish_entry, archive_write_finish_entry)                           \
  X(write_close, archive_write_close)                                         \
  X(entry_new, archive_entry_new)                                             \
  X(entry_free, archive_entry_free)                                           \
  X(entry_set_pathname, archive_entry_set_pathname)                           \
  X(entry_set_filetype, archive_entry_set_filetype)                           \
  X(entry_set_perm, archive_entry_set_perm)                                   \
  X(entry_set_size, archive_entry_set_size)                                   \
  X(entry_set_mtime, archive_entry_set_mtime)                                 \
  X(entry_set_uid, archive_entry_set_uid)                                     \
  X(entry_set_gid, archive_entry_set_gid)                                     \
  X(entry_set_uname, archive_entry_set_uname)                                 \
  X(entry_set_gname, archive_entry_set_gname)                                 \
  X(entry_pathname, archive_entry_pathname)                                   \
  X(entry_hardlink, archive_entry_hardlink)                                   \
  X(entry_symlink, archive_entry_symlink)                                     \
  X(entry_filetype, archive_entry_filetype)                                   \
  X(entry_size_is_set, archive_entry_size_is_set)                             \
  X(entry_size, archive_entry_size)

#define KILN_LAZY_FIELD(field, symbol) decltype(&::symbol) field = nullptr;

struct CurlApi {
  KILN_LAZY_CURL_SYMBOLS(KILN_LAZY_FIELD)
  KILN_LAZY_CURL_URL_SYMBOLS(KILN_LAZY_FIELD)
  bool has_url_api() const { return url && url_cleanup && url_get && url_set; }
};

struct ArchiveApi {
  KILN_LAZY_ARCHIVE_SYMBOLS(KILN_LAZY_FIELD)
  // archive_error_string, never null.
  std::string error_text(struct archive* a) const {
    const char* s = error_string(a);
    return s ? s : "unknown libarchive error";
  }
};

#undef KILN_LAZY_FIELD

// The table, loaded and resolved on the first call (thread-safe, once per process; a failure
// is remembered too). Error{Unsupported} when the library cannot be loaded or lacks a symbol:
// the message names the library, its SONAME, dlerror() or the missing symbols, `needed_for`
// (what asked for it: "the mirror tier ...", "unpacking <archive>") and what to do about it.
const CurlApi& curl(const std::string& needed_for);
const ArchiveApi& archive(const std::string& needed_for);

// What the build found: the library's name, the SONAME that is dlopen'ed, the Debian package
// that provides it ("" when dpkg did not know it at configure time), the header version
// libkiln was built with, and what kiln uses it for.
struct LibraryFacts {
  std::string name, soname, package, built_version, used_for;
};
LibraryFacts facts(Library lib);

// nullopt when the library loads with every symbol (loading it if not done yet), else why not
// (the dlerror() text or the missing symbols). For `kiln doctor`.
std::optional<std::string> load_problem(Library lib);

// Test seam (not an environment variable: nothing outside a test can reach it): dlopen `file`
// instead of the configured SONAME, on every call until called again with "" (the configured
// SONAME and its cached table again). Makes a library unloadable without uninstalling it.
void set_file_for_tests(Library lib, const std::string& file);

// Owning handles whose deleters go through the table that made the object.
struct ReadFree {
  const ArchiveApi* api = nullptr;
  void operator()(struct archive* a) const { api->read_free(a); }
};
struct WriteFree {
  const ArchiveApi* api = nullptr;
  void operator()(struct archive* a) const { api->write_free(a); }
};
struct EntryFree {
  const ArchiveApi* api = nullptr;
  void operator()(archive_entry* e) const { api->entry_free(e); }
};
using ReadHandle = std::unique_ptr<struct archive, ReadFree>;
using WriteHandle = std::unique_ptr<struct archive, WriteFree>;
using EntryHandle = std::unique_ptr<archive_entry, EntryFree>;

}  // namespace kiln::runtime::lazy_libs
