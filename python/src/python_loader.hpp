#pragma once
// kiln.Loader's native state (kiln._kiln.Loader): a kiln::Loader and the package it serves, which
// must outlive it. close() drops the loader; a call in flight in another thread holds its own
// reference (live()), so the loader and its modules go when the last such call returns.
#include <memory>

#include "described_package.hpp"
#include "kiln/error.hpp"
#include "kiln/loader.hpp"

namespace kiln::python {

struct PythonLoader {
  std::shared_ptr<DescribedPackage> package;
  std::shared_ptr<Loader> loader;  // null once closed

  // The loader for one call (take it with the GIL held, before releasing it); Error{Usage}
  // once closed.
  std::shared_ptr<Loader> live() const {
    if (!loader)
      throw Error(ErrorKind::Usage,
                  "this kiln.Loader is closed (Loader.close(), or the end of its with block): "
                  "make a new one",
                  {{"argument", "loader"}});
    return loader;
  }
};

}  // namespace kiln::python
