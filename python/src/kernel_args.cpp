#include "kernel_args.hpp"

#include <cstring>
#include <limits>
#include <type_traits>

#include "dlpack_view.hpp"
#include "kiln/error.hpp"

namespace kiln::python {

namespace {

struct DLDevice {
  std::int32_t device_type;
  std::int32_t device_id;
};
struct DLDataType {
  std::uint8_t code, bits;
  std::uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  std::int32_t ndim;
  DLDataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;
  std::uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};

[[noreturn]] void usage(const std::string& what, const std::string& message) {
  throw Error(ErrorKind::Usage, what + ": " + message, {{"argument", what}});
}

std::string python_type_name(nb::handle value) {
  return nb::cast<std::string>(nb::type_name(value.type()));
}

bool is_cuda_device(std::int32_t type) {
  return type == kDLCUDA || type == kDLCUDAHost || type == kDLCUDAManaged;
}

// A Python int as 64 bits: 0..2^64-1 as itself, -2^63..-1 as two's complement.
std::uint64_t int_bits(nb::handle value, const std::string& what) {
  int overflow = 0;
  long long s = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (overflow == 0) {
    if (s == -1 && PyErr_Occurred()) throw nb::python_error();
    return static_cast<std::uint64_t>(s);
  }
  unsigned long long u = PyLong_AsUnsignedLongLong(value.ptr());
  if (u == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    usage(what, "the int " + nb::cast<std::string>(nb::str(value)) +
                    " does not fit in 64 bits (a pointer or a 64-bit integer)");
  }
  return u;
}

// A 0-d buffer (a numpy scalar): its bytes. false when `value` has no buffer; Error{Usage} for
// a buffer that is an array (host memory: a kernel needs device memory).
bool copy_scalar_buffer(nb::handle value, const std::string& what, unsigned char* slot) {
  if (!PyObject_CheckBuffer(value.ptr())) return false;
  Py_buffer view;
  if (PyObject_GetBuffer(value.ptr(), &view, PyBUF_RECORDS_RO) != 0) {
    PyErr_Clear();
    return false;
  }
  const Py_ssize_t len = view.len, ndim = view.ndim;
  if (ndim == 0 && len > 0 && len <= 8) std::memcpy(slot, view.buf, static_cast<size_t>(len));
  PyBuffer_Release(&view);
  if (ndim != 0)
    usage(what, "a " + python_type_name(value) + " in host memory (a buffer of " +
                    std::to_string(ndim) +
                    " dimensions); kernels take device memory: a torch CUDA tensor, a CuPy array, "
                    "or a device pointer as int");
  if (len <= 0 || len > 8)
    usage(what, "a scalar of " + std::to_string(len) + " bytes; kernel scalars are 1 to 8 bytes");
  return true;
}

}  // namespace

Scalar make_scalar(const std::string& type, nb::handle value) {
  Scalar s;
  s.type = type;
  const std::string what = "kiln." + type + "()";
  auto store = [&](auto v) {
    s.size = sizeof(v);
    std::memcpy(s.bytes.data(), &v, sizeof(v));
  };
  if (type == "f32" || type == "f64") {
    if (!PyFloat_Check(value.ptr()) && !PyLong_Check(value.ptr()))
      usage(what, "takes a number, not a " + python_type_name(value));
    double d = PyFloat_AsDouble(value.ptr());
    if (type == "f32")
      store(static_cast<float>(d));
    else
      store(d);
    return s;
  }
  if (!PyLong_Check(value.ptr()) || PyBool_Check(value.ptr()))
    usage(what, "takes an int, not a " + python_type_name(value));
  auto out_of_range = [&](const std::string& lo, const std::string& hi) {
    usage(what,
          nb::cast<std::string>(nb::str(value)) + " is out of range [" + lo + ", " + hi + "]");
  };
  auto integer = [&](auto zero) {
    using T = decltype(zero);
    using Limits = std::numeric_limits<T>;
    if constexpr (std::is_same_v<T, std::uint64_t>) {
      unsigned long long u = PyLong_AsUnsignedLongLong(value.ptr());
      if (u == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
        PyErr_Clear();
        out_of_range("0", std::to_string(Limits::max()));
      }
      store(static_cast<T>(u));
    } else {
      int overflow = 0;
      long long x = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
      if (overflow != 0 || x < static_cast<long long>(Limits::min()) ||
          x > static_cast<long long>(Limits::max()))
        out_of_range(std::to_string(+Limits::min()), std::to_string(+Limits::max()));
      store(static_cast<T>(x));
    }
  };
  if (type == "i8")
    integer(std::int8_t{});
  else if (type == "u8")
    integer(std::uint8_t{});
  else if (type == "i16")
    integer(std::int16_t{});
  else if (type == "u16")
    integer(std::uint16_t{});
  else if (type == "i32")
    integer(std::int32_t{});
  else if (type == "u32")
    integer(std::uint32_t{});
  else if (type == "i64")
    integer(std::int64_t{});
  else if (type == "u64")
    integer(std::uint64_t{});
  else
    usage("kiln scalar", "'" + type + "' is not a scalar type");
  return s;
}

DLPackView read_dlpack(nb::handle value, const std::string& what) {
  nb::object capsule = value.attr("__dlpack__")(nb::arg("stream") = -1);
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (!managed) {
    PyErr_Clear();
    usage(what, "__dlpack__() of a " + python_type_name(value) +
                    " gave no 'dltensor' capsule (a used or versioned one is not read)");
  }
  const DLTensor& t = managed->dl_tensor;
  DLPackView v;
  v.data = reinterpret_cast<std::uint64_t>(t.data) + t.byte_offset;
  v.device_type = t.device.device_type;
  v.device_id = t.device.device_id;
  v.code = t.dtype.code;
  v.bits = t.dtype.bits;
  v.lanes = t.dtype.lanes;
  v.shape.assign(t.shape, t.shape + t.ndim);
  if (t.strides) v.strides.assign(t.strides, t.strides + t.ndim);
  return v;
}

std::optional<std::uint64_t> device_pointer(nb::handle value, const std::string& what) {
  if (nb::hasattr(value, "__cuda_array_interface__")) {
    nb::object cai = value.attr("__cuda_array_interface__");
    nb::object data = cai["data"];
    return int_bits(nb::handle(data[0]), what);
  }
  if (nb::hasattr(value, "__dlpack_device__") && nb::hasattr(value, "__dlpack__")) {
    nb::tuple dev = nb::cast<nb::tuple>(value.attr("__dlpack_device__")());
    const auto type = nb::cast<std::int32_t>(dev[0]);
    if (!is_cuda_device(type))
      usage(what, "a " + python_type_name(value) +
                      (type == kDLCPU ? " in host memory" : " on a device that is not CUDA") +
                      " (DLPack device type " + std::to_string(type) +
                      "); kernels take device memory: a torch CUDA tensor, a CuPy array, or a "
                      "device pointer as int");
    return read_dlpack(value, what).data;
  }
  return std::nullopt;
}

PackedArgs::PackedArgs(nb::handle args) {
  if (!PySequence_Check(args.ptr()) || PyUnicode_Check(args.ptr()))
    usage("args", "takes a list or tuple of kernel arguments, not a " + python_type_name(args));
  const Py_ssize_t n = PySequence_Size(args.ptr());
  if (n < 0) throw nb::python_error();
  if (static_cast<std::size_t>(n) > kMaxKernelArgs)
    usage("args", std::to_string(n) + " arguments; at most " + std::to_string(kMaxKernelArgs));
  count_ = static_cast<std::size_t>(n);
  for (std::size_t i = 0; i < count_; ++i) {
    nb::object value = nb::steal(PySequence_GetItem(args.ptr(), static_cast<Py_ssize_t>(i)));
    if (!value) throw nb::python_error();
    pack(i, value);
    params_[i] = slots_[i].data();
  }
}

void PackedArgs::pack(std::size_t i, nb::handle value) {
  unsigned char* slot = slots_[i].data();
  if (PyLong_CheckExact(value.ptr())) {  // the hot path: device pointers
    std::uint64_t bits = int_bits(value, "args[" + std::to_string(i) + "]");
    std::memcpy(slot, &bits, sizeof(bits));
    return;
  }
  const std::string what = "args[" + std::to_string(i) + "]";
  if (nb::isinstance<Scalar>(value)) {
    const Scalar& s = nb::cast<const Scalar&>(value);
    std::memcpy(slot, s.bytes.data(), s.size);
    return;
  }
  if (PyBool_Check(value.ptr()))
    usage(what, "a bool has no kernel type: pass kiln.u8(int(b)) or kiln.i32(int(b))");
  // NumPy scalars (numpy.float64 is a float subclass) and host arrays, by the buffer protocol.
  if (!PyFloat_CheckExact(value.ptr()) && copy_scalar_buffer(value, what, slot)) return;
  if (PyFloat_Check(value.ptr()))
    usage(what, "a float needs a type: kiln.f32(x), kiln.f64(x) or numpy.float32(x)");
  if (PyLong_Check(value.ptr())) {  // an int subclass (an IntEnum)
    std::uint64_t bits = int_bits(value, what);
    std::memcpy(slot, &bits, sizeof(bits));
    return;
  }
  if (std::optional<std::uint64_t> p = device_pointer(value, what)) {
    std::memcpy(slot, &*p, sizeof(*p));
    return;
  }
  usage(what, "a " + python_type_name(value) +
                  " is no kernel argument: pass a device pointer (int), an array with "
                  "__cuda_array_interface__ or __dlpack__, a numpy scalar or kiln.f32(x)-style "
                  "scalar");
}

void* stream_handle(nb::handle stream) {
  if (stream.is_none()) return nullptr;
  nb::object handle;
  if (PyLong_Check(stream.ptr()) && !PyBool_Check(stream.ptr()))
    handle = nb::borrow(stream);
  else if (nb::hasattr(stream, "__cuda_stream__"))
    handle = nb::cast<nb::tuple>(stream.attr("__cuda_stream__")())[1];
  else if (nb::hasattr(stream, "cuda_stream"))
    handle = stream.attr("cuda_stream");
  else
    usage("stream", "a " + python_type_name(stream) +
                        " is no stream: pass None, a CUstream as int, or an object with "
                        "cuda_stream (torch.cuda.Stream) or __cuda_stream__ (CuPy, cuda.core)");
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(int_bits(handle, "stream")));
}

Loader::Dim3 dim3(nb::handle value, const char* name) {
  unsigned d[3] = {1, 1, 1};
  auto one = [&](nb::handle v, int k) {
    if (!PyLong_Check(v.ptr()) || PyBool_Check(v.ptr()))
      usage(name, "takes ints, not a " + python_type_name(v));
    long long x = PyLong_AsLongLong(v.ptr());
    if (x == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      x = -1;
    }
    if (x < 1 || x > static_cast<long long>(std::numeric_limits<unsigned>::max()))
      usage(name, "each dimension is 1 to 2^32-1, got " + nb::cast<std::string>(nb::str(v)));
    d[k] = static_cast<unsigned>(x);
  };
  if (PyLong_Check(value.ptr())) {
    one(value, 0);
  } else {
    if (!PySequence_Check(value.ptr()))
      usage(name, "takes an int or a tuple of 1 to 3 ints, not a " + python_type_name(value));
    Py_ssize_t n = PySequence_Size(value.ptr());
    if (n < 1 || n > 3) usage(name, "takes 1 to 3 dimensions, got " + std::to_string(n));
    for (Py_ssize_t k = 0; k < n; ++k)
      one(nb::steal(PySequence_GetItem(value.ptr(), k)), static_cast<int>(k));
  }
  return {d[0], d[1], d[2]};
}

}  // namespace kiln::python
