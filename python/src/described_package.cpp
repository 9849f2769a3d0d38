#include "described_package.hpp"

#include <dlfcn.h>

#include <filesystem>

#include "kiln/error.hpp"
#include "project/package_description.hpp"
#include "python_errors.hpp"

namespace kiln::python {

std::shared_ptr<DescribedPackage> DescribedPackage::from_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) && !ec)
    throw missing_file("no package description at " + path +
                           " (kiln build --dist writes <name>-<version>.package.json)",
                       path);
  std::shared_ptr<DescribedPackage> p(new DescribedPackage());
  p->data_ = project::load_package_description(path);
  p->package_ = p->data_->get();
  std::filesystem::path abs = std::filesystem::absolute(path);
  p->origin_ = abs.string();
  p->store_dir_ = abs.parent_path().string();
  return p;
}

std::shared_ptr<DescribedPackage> DescribedPackage::from_library(const std::string& path,
                                                                 const std::string& symbol) {
  // Never closed: the description is static data of the library, and a Loader may outlive
  // the Python object that made it.
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    throw Error(ErrorKind::NotFound,
                "cannot load the package library " + path + ": " + (why ? why : "dlopen failed"),
                {{"path", path}});
  }
  using Describe = const kiln_package* (*)();
  auto describe = reinterpret_cast<Describe>(::dlsym(handle, symbol.c_str()));
  if (!describe)
    throw Error(ErrorKind::NotFound,
                path + " defines no '" + symbol +
                    "' (the SYMBOL given to kiln_add_kernel_package, e.g. acme_kernels_package)",
                {{"path", path}, {"field", symbol}});
  const kiln_package* pkg = describe();
  if (!pkg)
    throw Error(ErrorKind::Usage, symbol + "() in " + path + " returned no package",
                {{"path", path}, {"field", symbol}});
  std::shared_ptr<DescribedPackage> p(new DescribedPackage());
  p->package_ = pkg;
  p->origin_ = path;
  return p;
}

}  // namespace kiln::python
