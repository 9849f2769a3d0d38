#pragma once
// kiln::ops (kiln/ops.hpp) over raw device pointers as ints: what kiln/ops.py calls once it has
// checked the arrays (device, dtype, shape, contiguity). The C++ functions check again (null,
// sizes, alignment, the loader's package) and throw Error{Usage} naming the argument.
// bind_ops is generated from loader/ops_table.py (cmake/gen_ops.py: ops_bindings.cpp in the build
// tree); what every op's binding shares is here.
#include <nanobind/nanobind.h>

#include <cstdint>
#include <string>

#include "kiln/error.hpp"
#include "kiln/ops.hpp"

namespace kiln::python {

namespace nb = nanobind;

void bind_ops(nb::module_& m);

// A device pointer as Python passes it: an int.
using OpPtr = std::uint64_t;

inline void* as_ptr(OpPtr p) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(p)); }

// "f32", "f16", "bf16" (ops::to_string's spelling); anything else is a UsageError naming dtype.
inline ops::DType dtype_named(const std::string& name) {
  for (ops::DType d : {ops::DType::F32, ops::DType::F16, ops::DType::BF16})
    if (name == ops::to_string(d)) return d;
  throw Error(ErrorKind::Usage, "dtype '" + name + "' is not one of f32, f16, bf16",
              {{"argument", "dtype"}, {"value", name}});
}

// Every op: the GIL is released around the call (get() may read a store, download or JIT).
template <typename F>
void without_gil(F&& f) {
  nb::gil_scoped_release release;
  f();
}

}  // namespace kiln::python
