#pragma once
// Python values into what cuLaunchKernel takes (docs/python.md "Arguments"): each kernel
// argument is copied into an 8-byte slot and kernelParams points at the slots; the count and
// each value's size are checked against the kernel's parameters where the driver reports them.
//   int                          a device pointer, or an integer of the parameter's size (range-
//                                checked; negative: two's complement)
//   kiln.f32(x), kiln.i32(x)...  a scalar of that type (Scalar below), of the parameter's size
//   numpy scalar / 0-d buffer    its bytes, at its own size (numpy.float32(2.0), numpy.int32(7))
//   __cuda_array_interface__     its data pointer (PyTorch and CuPy device arrays); its v3
//                                `stream` is synchronised when it is not the launch's
//   __dlpack__                   its data pointer, when __dlpack_device__ is CUDA (or managed);
//                                __dlpack__ is asked for the launch's stream
// An array on another device than the kernel's is Error{Usage}. Anything else (a float, a bool,
// a host array, a str) is Error{Usage} naming args[i] and what to pass instead. Streams: an
// int (a CUstream), or an object with `cuda_stream` (torch.cuda.Stream) or `__cuda_stream__`
// (version 0: CuPy, cuda.core); None: kiln._arrays.default_stream of the arguments (their
// framework's current stream, else the legacy default stream).
#include <nanobind/nanobind.h>

#include <array>
#include <cstdint>
#include <optional>
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

// An integer from any object with __index__ (operator.index: int, numpy.int64; not a float,
// not a bool) in [lo, hi]; Error{Usage} naming `name` and the range otherwise.
std::uint64_t index_in_range(nb::handle value, const std::string& name, std::uint64_t lo,
                             std::uint64_t hi);

class PackedArgs {
 public:
  // Packs `args` for a launch on `stream` (DLPack producers are asked for it, CAI v3 streams
  // other than it synchronised) by `kernel`'s entry `entry`: the count, each value's size and
  // each array's device are checked against it. Throws Error{Usage} naming args[i].
  PackedArgs(nb::handle args, void* stream, const KernelHandle& kernel, std::size_t entry);
  void** params() { return params_.data(); }
  std::size_t count() const { return count_; }

 private:
  enum class Kind { Int, Bytes, Pointer };
  struct Packed {
    Kind kind = Kind::Bytes;
    std::size_t size = 8;   // Bytes: the value's size
    bool negative = false;  // Int: the value was negative (bits hold two's complement)
    int device = -1;        // Pointer: the array's device ordinal, -1 when it does not say
    std::string type;       // for messages: "int", "kiln.f32", "numpy.float64", "torch.Tensor"
  };
  void pack(std::size_t i, nb::handle value);
  void check(const KernelHandle& kernel, std::size_t entry) const;
  void* stream_ = nullptr;
  std::array<std::array<unsigned char, 8>, kMaxKernelArgs> slots_{};
  std::array<void*, kMaxKernelArgs> params_{};
  std::array<Packed, kMaxKernelArgs> packed_{};
  std::size_t count_ = 0;
};

// The device pointer of an array argument (__cuda_array_interface__ or a CUDA __dlpack__), or
// nullopt when `value` exposes neither; Error{Usage} naming `what` for a non-CUDA DLPack array.
// The array's stream is ordered before `stream` (the launch's): __dlpack__(stream=...) is asked
// for it, a CAI v3 `stream` that differs is synchronised. `device` gets the array's device
// ordinal (-1 when the array does not say).
std::optional<std::uint64_t> device_pointer(nb::handle value, const std::string& what,
                                            void* stream, int* device = nullptr);

// The DLPack `stream` argument for a launch on `stream`: 1 (the legacy default stream) for
// nullptr, else the handle.
std::int64_t dlpack_stream(void* stream);

// A CUstream from an int, or an object with `cuda_stream` / `__cuda_stream__` (version 0);
// None is nullptr (the legacy default stream).
void* stream_handle(nb::handle stream);
// The stream a launch of `args` runs on when `stream` is None: kiln._arrays.default_stream.
void* launch_stream(nb::handle stream, nb::handle args);

// grid/block: an int or 1..3 ints (operator.index), each in [1, 2^32).
Loader::Dim3 dim3(nb::handle value, const char* name);

}  // namespace kiln::python
