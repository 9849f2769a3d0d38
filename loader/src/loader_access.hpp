#pragma once
// What the typed host functions (ops.cpp) need of a Loader beyond its public API: the driver
// it was created with, so that they ask the same driver (a test's fake included) for the
// current context and device. Not installed.
#include "kiln/loader.hpp"
#include "runtime/driver.hpp"

namespace kiln {

struct LoaderAccess {
  static runtime::Driver& driver(const Loader& loader);
};

}  // namespace kiln
