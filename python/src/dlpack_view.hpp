#pragma once
// What kiln reads of a DLPack tensor (the dlpack.h ABI, v0.8 and later, unversioned capsules):
// declared here so the module needs no dlpack header. https://dmlc.github.io/dlpack/latest/
#include <nanobind/nanobind.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::python {

namespace nb = nanobind;

enum DLDeviceKind : std::int32_t { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13 };

struct DLPackView {
  std::uint64_t data = 0;  // data + byte_offset
  std::int32_t device_type = 0, device_id = 0;
  std::uint8_t code = 0, bits = 0;  // DLDataTypeCode (0 int, 1 uint, 2 float, 4 bfloat), width
  std::uint16_t lanes = 0;
  std::vector<std::int64_t> shape, strides;  // strides in elements; empty = compact row-major
};

// Calls value.__dlpack__(stream=stream) (the consumer's stream as DLPack spells it: 1 the legacy
// default stream, a CUstream handle, -1 no synchronisation; the producer orders its work before
// it) and reads the tensor; the capsule is left unconsumed, so its destructor returns it to the
// producer. `value` must stay alive while the pointer is used. Error{Usage} naming `what` when
// the object is no DLPack tensor.
DLPackView read_dlpack(nb::handle value, const std::string& what, nb::handle stream);

}  // namespace kiln::python
