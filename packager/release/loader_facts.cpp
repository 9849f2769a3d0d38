#include "release/loader_facts.hpp"

#include <dlfcn.h>

#include "kiln/error.hpp"
#include "kiln/kiln.h"
#include "util/join.hpp"

namespace kiln::release {

namespace fs = std::filesystem;

namespace {

// The five C ABI functions of one libkiln, wherever they came from.
struct FactsApi {
  const char* (*version)() = nullptr;
  const char* (*cuda_version)() = nullptr;
  int (*manifest_format)() = nullptr;
  int (*index_format)() = nullptr;
};

LoaderFacts ask(const FactsApi& api, std::shared_ptr<void> handle) {
  LoaderFacts f;
  // The file the answering symbol really lives in (not a path we asked for): should the
  // dynamic loader hand back another copy of libkiln, the report names that copy.
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(api.version), &info) && info.dli_fname) {
    std::error_code ec;
    fs::path canon = fs::weakly_canonical(info.dli_fname, ec);
    f.library = ec ? std::string(info.dli_fname) : canon.string();
  }
  f.version = api.version();
  f.cuda_version = api.cuda_version();
  f.manifest_format = api.manifest_format();
  f.index_format = api.index_format();
  f.handle = std::move(handle);
  return f;
}

}  // namespace

std::optional<std::string> LoaderFacts::source_hash(const std::string& uri) const {
  auto it = source_hashes.find(uri);
  if (it == source_hashes.end()) return std::nullopt;
  return it->second;
}

void set_package(LoaderFacts& facts, const project::Project& project) {
  facts.package = project.name;
  facts.package_version = project.version;
  facts.source_hashes.clear();
  facts.kernels_known = true;
  for (const auto& s : project.registry.specialisations) facts.source_hashes[s.uri] = s.source_hash;
}

void set_package(LoaderFacts& facts, const kiln_package& package) {
  facts.package = package.name;
  facts.package_version = package.version;
  facts.source_hashes.clear();
  facts.kernels_known = true;
  for (std::size_t i = 0; i < package.kernel_count; ++i)
    facts.source_hashes[package.kernels[i].uri] = package.kernels[i].source_hash;
}

LoaderFacts this_loader_facts() {
  return ask({&kiln_version, &kiln_cuda_version, &kiln_manifest_format, &kiln_index_format},
             nullptr);
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
  std::vector<const char*> missing;
  auto sym = [&](const char* name) {
    void* p = ::dlsym(h, name);
    if (!p) missing.push_back(name);
    return p;
  };
  FactsApi api;
  api.version = reinterpret_cast<const char* (*)()>(sym("kiln_version"));
  api.cuda_version = reinterpret_cast<const char* (*)()>(sym("kiln_cuda_version"));
  api.manifest_format = reinterpret_cast<int (*)()>(sym("kiln_manifest_format"));
  api.index_format = reinterpret_cast<int (*)()>(sym("kiln_index_format"));
  if (!missing.empty())
    throw Error(ErrorKind::Unsupported,
                abs.string() + " is not a libkiln this kiln can question: missing " +
                    util::join(missing, ", ") + " (libkiln 0.1.0 and later export them)");
  return ask(api, std::move(handle));
}

}  // namespace kiln::release
