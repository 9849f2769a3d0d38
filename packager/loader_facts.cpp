#include "loader_facts.hpp"

#include <dlfcn.h>

#include "kiln/error.hpp"
#include "kiln/kiln.h"

namespace kiln::cli {

namespace fs = std::filesystem;

std::optional<std::string> LoaderFacts::source_hash(const std::string& uri) const {
  const char* h = source_hash_fn ? source_hash_fn(uri.c_str()) : nullptr;
  if (!h) return std::nullopt;
  return std::string(h);
}

LoaderFacts this_loader_facts() {
  LoaderFacts f;
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&kiln_version), &info) && info.dli_fname)
    f.library = info.dli_fname;
  std::error_code ec;
  fs::path canon = fs::weakly_canonical(f.library, ec);
  if (!ec && !f.library.empty()) f.library = canon.string();
  f.version = kiln_version();
  f.cuda_version = kiln_cuda_version();
  f.manifest_format = kiln_manifest_format();
  f.index_format = kiln_index_format();
  f.source_hash_fn = &kiln_source_hash;
  return f;
}

LoaderFacts open_loader_facts(const fs::path& library) {
  std::error_code ec;
  if (!fs::exists(library, ec))
    throw Error(ErrorKind::NotFound, "no libkiln at " + library.string());
  fs::path abs = fs::absolute(library, ec);
  // RTLD_LOCAL keeps its symbols out of our namespace; libkiln is linked with -Bsymbolic, so
  // its own calls bind to itself and the answers are that build's, not this process's.
  void* h = ::dlopen(abs.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* why = ::dlerror();
    throw Error(ErrorKind::Unsupported,
                "cannot load " + abs.string() + " as libkiln: " + (why ? why : "dlopen failed"));
  }
  std::shared_ptr<void> handle(h, [](void* p) { ::dlclose(p); });
  std::string missing;
  auto sym = [&](const char* name) {
    void* p = ::dlsym(h, name);
    if (!p) missing += std::string(missing.empty() ? "" : ", ") + name;
    return p;
  };
  auto version = reinterpret_cast<const char* (*)()>(sym("kiln_version"));
  auto cuda = reinterpret_cast<const char* (*)()>(sym("kiln_cuda_version"));
  auto mformat = reinterpret_cast<int (*)()>(sym("kiln_manifest_format"));
  auto iformat = reinterpret_cast<int (*)()>(sym("kiln_index_format"));
  auto hash = reinterpret_cast<LoaderFacts::SourceHashFn>(sym("kiln_source_hash"));
  if (!missing.empty())
    throw Error(ErrorKind::Unsupported, abs.string() +
                                            " is not a libkiln this kiln can question: missing " +
                                            missing + " (libkiln 0.1.0 and later export them)");
  LoaderFacts f;
  f.library = fs::weakly_canonical(abs, ec).string();
  if (ec) f.library = abs.string();
  f.version = version();
  f.cuda_version = cuda();
  f.manifest_format = mformat();
  f.index_format = iformat();
  f.source_hash_fn = hash;
  f.handle = std::move(handle);
  return f;
}

}  // namespace kiln::cli
