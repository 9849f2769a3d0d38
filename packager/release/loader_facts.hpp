#pragma once
// What a loader accepts: libkiln's version and the formats it reads (from the libkiln linked into
// this process, or another build opened with dlopen: `kiln compat --loader LIB`, `kiln tarball`
// checking what it packs, through the C ABI facts in kiln/kiln.h), and the package it serves:
// its name, version and the source hash it expects for each kernel (from the project, as its
// generated description gives them).
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "project/package.hpp"

namespace kiln::release {

struct LoaderFacts {
  std::string library;       // path of the shared library the facts came from
  std::string version;       // "0.1.0"
  std::string cuda_version;  // "13.0"
  int manifest_format = 0;
  int index_format = 0;
  std::string package;                               // the package served ("" until set_package)
  std::string package_version;                       // its version
  std::map<std::string, std::string> source_hashes;  // uri -> hash
  // false: no description of the package was found (an input names a package kiln has none
  // of); its kernels' source hashes cannot be judged and are not.
  bool kernels_known = true;
  // nullopt: the package has no such URI.
  std::optional<std::string> source_hash(const std::string& uri) const;

  std::shared_ptr<void> handle;  // keeps a dlopen'ed library open while the facts live
};

// The package a loader will serve, from its project (every URI and source hash).
void set_package(LoaderFacts& facts, const project::Project& project);
// The same from a package description (a library's, or one installed beside a store).
void set_package(LoaderFacts& facts, const kiln_package& package);

// The libkiln this process runs with.
LoaderFacts this_loader_facts();
// Another build of libkiln. Error{NotFound} when the file is missing, Error{Unsupported} when it
// does not load or lacks one of the symbols (each missing symbol named).
LoaderFacts open_loader_facts(const std::filesystem::path& library);

}  // namespace kiln::release
