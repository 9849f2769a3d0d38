#pragma once
// Python values into what cuLaunchKernel takes (docs/python.md "Arguments"): each kernel
// argument is copied into an 8-byte slot and kernelParams points at the slots.
//   int                          a device pointer, or a 64-bit integer (two's complement)
//   kiln.f32(x), kiln.i32(x)...  a scalar of that type (Scalar below)
//   numpy scalar / 0-d buffer    its bytes, at its own size (numpy.float32(2.0), numpy.int32(7))
//   __cuda_array_interface__     its data pointer (PyTorch and CuPy device arrays)
//   __dlpack__                   its data pointer, when __dlpack_device__ is CUDA (or managed)
// Anything else (a float, a bool, a host array, a str) is Error{Usage} naming args[i] and what
// to pass instead. Streams: None (the legacy default stream), an int (a CUstream), or an object
// with `cuda_stream` (torch.cuda.Stream) or `__cuda_stream__` (CuPy, cuda.core).
#include <nanobind/nanobind.h>

#include <array>
#include <cstdint>
#include <string>

#include "kiln/loader.hpp"

namespace kiln::python {

namespace nb = nanobind;

// A typed scalar argument: kiln.f32(x) and its siblings.
struct Scalar {
  std::string type;  // "f32", "f64", "i32", "u32", "i64", "u64", "i16", "u16", "i8", "u8"
  std::array<unsigned char, 8> bytes{};
  std::size_t size = 0;
};
Scalar make_scalar(const std::string& type, nb::handle value);

constexpr std::size_t kMaxKernelArgs = 64;

class PackedArgs {
 public:
  // Throws Error{Usage} naming args[i].
  explicit PackedArgs(nb::handle args);
  void** params() { return params_.data(); }
  std::size_t count() const { return count_; }

 private:
  void pack(std::size_t i, nb::handle value);
  std::array<std::array<unsigned char, 8>, kMaxKernelArgs> slots_{};
  std::array<void*, kMaxKernelArgs> params_{};
  std::size_t count_ = 0;
};

// The device pointer of an array argument (__cuda_array_interface__ or a CUDA __dlpack__), or
// nullopt when `value` exposes neither; Error{Usage} naming `what` for a non-CUDA DLPack array.
std::optional<std::uint64_t> device_pointer(nb::handle value, const std::string& what);

// A CUstream from None, an int, or an object with `cuda_stream` / `__cuda_stream__`.
void* stream_handle(nb::handle stream);

// grid/block: an int or 1..3 ints, each in [1, 2^32).
Loader::Dim3 dim3(nb::handle value, const char* name);

}  // namespace kiln::python
