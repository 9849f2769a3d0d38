#pragma once
// kiln.Loader's state: a kiln::Loader and the package it serves, which must outlive it.
#include <memory>

#include "described_package.hpp"
#include "kiln/loader.hpp"

namespace kiln::python {

struct PythonLoader {
  std::shared_ptr<DescribedPackage> package;
  std::unique_ptr<Loader> loader;
};

}  // namespace kiln::python
