// dlopen tables for libcurl and libarchive (lazy_libs.hpp). The SONAMEs and Debian packages
// come from CMake (cmake/soname.cmake reads them from the libraries it found).
#include "runtime/lazy_libs.hpp"

#include <dlfcn.h>

#include <list>
#include <map>
#include <mutex>
#include <vector>

#include "kiln/error.hpp"
#include "util/join.hpp"

#if !defined(KILN_CURL_SONAME) || !defined(KILN_ARCHIVE_SONAME) || !defined(KILN_CURL_PACKAGE) || \
    !defined(KILN_ARCHIVE_PACKAGE)
#error "CMake defines KILN_{CURL,ARCHIVE}_{SONAME,PACKAGE} for lazy_libs.cpp (cmake/soname.cmake)"
#endif

namespace kiln::runtime::lazy_libs {

namespace {

// dlopen(file) and every symbol of the table at once; "" on success, else why not.
template <typename Api>
std::string open_and_resolve(const std::string& file, Api& api, const LibraryFacts& f,
                             void (*resolve)(void*, Api&, std::vector<std::string>&)) {
  ::dlerror();
  void* handle = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* err = ::dlerror();
    return "dlopen(" + file + ") failed: " + (err ? err : "unknown error");
  }
  std::vector<std::string> missing;
  resolve(handle, api, missing);
  if (missing.empty()) return "";  // kept open for the life of the process
  ::dlclose(handle);
  return file + " lacks " + util::join(missing, ", ") + " (libkiln was built against " + f.name +
         " " + f.built_version + ")";
}

#define KILN_LAZY_RESOLVE(field, symbol)                                       \
  api.field = reinterpret_cast<decltype(api.field)>(::dlsym(handle, #symbol)); \
  if (!api.field) missing.push_back(#symbol);

#define KILN_LAZY_RESOLVE_OPTIONAL(field, symbol) \
  api.field = reinterpret_cast<decltype(api.field)>(::dlsym(handle, #symbol));

void resolve_curl(void* handle, CurlApi& api, std::vector<std::string>& missing) {
  KILN_LAZY_CURL_SYMBOLS(KILN_LAZY_RESOLVE)
  KILN_LAZY_CURL_URL_SYMBOLS(KILN_LAZY_RESOLVE_OPTIONAL)
}

#undef KILN_LAZY_RESOLVE_OPTIONAL

void resolve_archive(void* handle, ArchiveApi& api, std::vector<std::string>& missing) {
  KILN_LAZY_ARCHIVE_SYMBOLS(KILN_LAZY_RESOLVE)
}

#undef KILN_LAZY_RESOLVE

template <typename Api>
struct Slot {
  std::once_flag once;
  Api api;
  std::string problem;  // "" once loaded
};

std::mutex g_override_mutex;
std::map<Library, std::string>& overrides() {
  static std::map<Library, std::string> m;
  return m;
}

std::optional<std::string> override_file(Library lib) {
  std::lock_guard<std::mutex> g(g_override_mutex);
  auto it = overrides().find(lib);
  if (it == overrides().end()) return std::nullopt;
  return it->second;
}

[[noreturn]] void fail(const LibraryFacts& f, const std::string& file,
                       const std::string& needed_for, const std::string& problem) {
  std::string install = f.package.empty() ? "install the package that provides " + f.soname
                                          : "install the Debian package " + f.package +
                                                " (it provides " + f.soname + ")";
  std::string instead =
      f.name == "libcurl"
          ? "a program that only loads kernels can do without it: load from a local store "
            "(KILN_ARTIFACT_PATH, or a cache directory filled by `kiln fetch` on a machine that "
            "has " +
                f.name + ") and set KILN_OFFLINE=1 so that no mirror is tried"
          : "stores that are already unpacked (KILN_ARTIFACT_PATH, the installed store, the "
            "cache directory) load without it";
  throw Error(ErrorKind::Unsupported, f.name + " (" + file + ") cannot be loaded, and " +
                                          needed_for + " needs it: " + problem +
                                          ". To fix: " + install + "; " + instead);
}

// The table for `lib`: the override's (tests), else the cached one of the configured SONAME.
template <typename Api>
std::pair<const Api*, std::string> load(Library lib,
                                        void (*resolve)(void*, Api&, std::vector<std::string>&),
                                        std::string* file_out) {
  LibraryFacts f = facts(lib);
  if (auto file = override_file(lib)) {
    // Tests only: a table per successful load, kept for the life of the process.
    static std::mutex m;
    static std::list<Api> kept;
    Api api;
    std::string problem = open_and_resolve(*file, api, f, resolve);
    *file_out = *file;
    if (!problem.empty()) return {nullptr, problem};
    std::lock_guard<std::mutex> g(m);
    kept.push_back(api);
    return {&kept.back(), ""};
  }
  static Slot<Api> slot;
  std::call_once(slot.once,
                 [&] { slot.problem = open_and_resolve(f.soname, slot.api, f, resolve); });
  *file_out = f.soname;
  if (!slot.problem.empty()) return {nullptr, slot.problem};
  return {&slot.api, ""};
}

}  // namespace

LibraryFacts facts(Library lib) {
  if (lib == Library::Curl)
    return {"libcurl", KILN_CURL_SONAME, KILN_CURL_PACKAGE, LIBCURL_VERSION,
            "downloads from mirrors: the mirror tier, kiln fetch, kiln mirror sync, the TUF "
            "client, kiln doctor's mirror probe"};
  return {"libarchive", KILN_ARCHIVE_SONAME, KILN_ARCHIVE_PACKAGE, ARCHIVE_VERSION_ONLY_STRING,
          "reading and writing archives (.tar.zst) and wheels: installing a fetched archive "
          "into a store, and kiln install, verify, inspect, compat, wheel, tarball, mirror"};
}

const CurlApi& curl(const std::string& needed_for) {
  std::string file;
  auto [api, problem] = load<CurlApi>(Library::Curl, resolve_curl, &file);
  if (!api) fail(facts(Library::Curl), file, needed_for, problem);
  return *api;
}

const ArchiveApi& archive(const std::string& needed_for) {
  std::string file;
  auto [api, problem] = load<ArchiveApi>(Library::Archive, resolve_archive, &file);
  if (!api) fail(facts(Library::Archive), file, needed_for, problem);
  return *api;
}

std::optional<std::string> load_problem(Library lib) {
  std::string file;
  std::string problem = lib == Library::Curl ? load<CurlApi>(lib, resolve_curl, &file).second
                                             : load<ArchiveApi>(lib, resolve_archive, &file).second;
  if (problem.empty()) return std::nullopt;
  return problem;
}

void set_file_for_tests(Library lib, const std::string& file) {
  std::lock_guard<std::mutex> g(g_override_mutex);
  if (file.empty())
    overrides().erase(lib);
  else
    overrides()[lib] = file;
}

}  // namespace kiln::runtime::lazy_libs
