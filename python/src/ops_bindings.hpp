#pragma once
// kiln::ops (kiln/ops.hpp) over raw device pointers as ints: what kiln/ops.py calls once it has
// checked the arrays (device, dtype, shape, contiguity). The C++ functions check again (null,
// sizes, alignment, the loader's package) and throw Error{Usage} naming the argument.
#include <nanobind/nanobind.h>

namespace kiln::python {

namespace nb = nanobind;

void bind_ops(nb::module_& m);

}  // namespace kiln::python
