#pragma once
// A kernel package as Python holds it: read from a description file
// (<name>-<version>.package.json, project/package_description.hpp) or taken from a library that
// defines one (kiln_add_kernel_package's `const kiln_package* SYMBOL(void)`). A Loader keeps it
// alive: kiln::Loader requires its package to outlive it.
#include <memory>
#include <string>

#include "kiln/package.h"
#include "project/package.hpp"

namespace kiln::python {

class DescribedPackage {
 public:
  // Throws what load_package_description throws (NotFound, Io, Format, Stale, Limit), naming
  // the file.
  static std::shared_ptr<DescribedPackage> from_file(const std::string& path);
  // dlopen(path) and call `symbol`; Error{NotFound} naming the library or the symbol,
  // Error{Usage} when it returns null.
  static std::shared_ptr<DescribedPackage> from_library(const std::string& path,
                                                        const std::string& symbol);

  const kiln_package& get() const { return *package_; }
  // The file or library it came from.
  const std::string& origin() const { return origin_; }
  // The store a description file ships in (its directory); "" for a library (the loader then
  // finds <library dir>/../share/kiln/artifacts itself).
  const std::string& store_dir() const { return store_dir_; }

 private:
  DescribedPackage() = default;
  std::unique_ptr<project::PackageData> data_;
  const kiln_package* package_ = nullptr;
  std::string origin_, store_dir_;
};

}  // namespace kiln::python
