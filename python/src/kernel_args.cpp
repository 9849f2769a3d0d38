#include "kernel_args.hpp"

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "dlpack_view.hpp"
#include "kiln/error.hpp"
#include "runtime/driver.hpp"

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

// A 0-d buffer (a numpy scalar): its bytes into `slot`, returning their count; 0 when `value`
// has no buffer; Error{Usage} for a buffer that is an array (host memory: a kernel needs device
// memory).
std::size_t copy_scalar_buffer(nb::handle value, const std::string& what, unsigned char* slot) {
  if (!PyObject_CheckBuffer(value.ptr())) return 0;
  Py_buffer view;
  if (PyObject_GetBuffer(value.ptr(), &view, PyBUF_RECORDS_RO) != 0) {
    PyErr_Clear();
    return 0;
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
  return static_cast<std::size_t>(len);
}

}  // namespace

std::uint64_t index_in_range(nb::handle value, const std::string& name, std::uint64_t lo,
                             std::uint64_t hi) {
  auto range = [&] {
    return "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  };
  if (PyBool_Check(value.ptr()) || !PyIndex_Check(value.ptr()))
    usage(name, "takes an integer in " + range() + ", not a " + python_type_name(value));
  nb::object i = nb::steal(PyNumber_Index(value.ptr()));
  if (!i) throw nb::python_error();
  int overflow = 0;
  long long s = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  bool ok = false;
  std::uint64_t u = 0;
  if (overflow == 0 && !(s == -1 && PyErr_Occurred())) {
    ok = s >= 0 && static_cast<std::uint64_t>(s) >= lo && static_cast<std::uint64_t>(s) <= hi;
    u = static_cast<std::uint64_t>(s);
  } else if (overflow > 0) {
    unsigned long long v = PyLong_AsUnsignedLongLong(i.ptr());
    if (!(v == static_cast<unsigned long long>(-1) && PyErr_Occurred())) {
      ok = v >= lo && v <= hi;
      u = v;
    }
  }
  PyErr_Clear();
  if (!ok) usage(name, nb::cast<std::string>(nb::str(i)) + " is out of range " + range());
  return u;
}

Scalar make_scalar(const std::string& type, nb::handle value) {
  Scalar s;
  s.type = type;
  const std::string what = "kiln." + type + "()";
  auto store = [&](auto v) {
    s.size = sizeof(v);
    std::memcpy(s.bytes.data(), &v, sizeof(v));
  };
  if (type == "f32" || type == "f64") {
    // A real number: a float (numpy floats too), an int, anything float() takes but a string.
    if (PyBool_Check(value.ptr()) || PyUnicode_Check(value.ptr()) ||
        PyBytes_Check(value.ptr()) || PyByteArray_Check(value.ptr()))
      usage(what, "takes a number, not a " + python_type_name(value));
    const bool f32 = type == "f32";
    const std::string range = f32 ? "[-3.4028234663852886e+38, 3.4028234663852886e+38]"
                                  : "[-1.7976931348623157e+308, 1.7976931348623157e+308]";
    nb::object as_float = nb::steal(PyNumber_Float(value.ptr()));
    if (!as_float) {
      const bool overflow = PyErr_ExceptionMatches(PyExc_OverflowError);  // an int past a double
      PyErr_Clear();
      if (overflow) usage(what, nb::cast<std::string>(nb::str(value)) + " is out of range " + range);
      usage(what, "takes a number, not a " + python_type_name(value));
    }
    const double d = PyFloat_AsDouble(as_float.ptr());
    if (f32) {
      if (std::isfinite(d) && std::fabs(d) > static_cast<double>(FLT_MAX))
        usage(what, nb::cast<std::string>(nb::repr(value)) + " is out of range " + range +
                        " (a float32; pass kiln.f64(x) for a double parameter)");
      store(static_cast<float>(d));
    } else {
      store(d);
    }
    return s;
  }
  if (PyBool_Check(value.ptr()) || !PyIndex_Check(value.ptr()))
    usage(what, "takes an int, not a " + python_type_name(value));
  auto integer = [&](auto zero) {
    using T = decltype(zero);
    using Limits = std::numeric_limits<T>;
    if constexpr (std::is_signed_v<T>) {
      // Signed: shift into [0, 2^64) to reuse the unsigned range check.
      nb::object i = nb::steal(PyNumber_Index(value.ptr()));
      if (!i) throw nb::python_error();
      int overflow = 0;
      long long x = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
      if (overflow != 0 || x < static_cast<long long>(Limits::min()) ||
          x > static_cast<long long>(Limits::max()))
        usage(what, nb::cast<std::string>(nb::str(i)) + " is out of range [" +
                        std::to_string(+Limits::min()) + ", " + std::to_string(+Limits::max()) +
                        "]");
      store(static_cast<T>(x));
    } else {
      store(static_cast<T>(index_in_range(value, what, 0, Limits::max())));
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

DLPackView read_dlpack(nb::handle value, const std::string& what, nb::handle stream) {
  nb::object capsule = value.attr("__dlpack__")(nb::arg("stream") = stream);
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

std::int64_t dlpack_stream(void* stream) {
  return stream ? static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(stream)) : 1;
}

namespace {

// The device an object with __cuda_array_interface__ says it is on (the interface itself does
// not): torch's .device.index, CuPy's .device.id; -1 when neither.
int cai_device(nb::handle value) {
  if (!nb::hasattr(value, "device")) return -1;
  nb::object dev = value.attr("device");
  for (const char* attr : {"index", "id"}) {
    if (!nb::hasattr(dev, attr)) continue;
    nb::object i = dev.attr(attr);
    if (PyLong_CheckExact(i.ptr())) return nb::cast<int>(i);
  }
  return -1;
}

// CUDA Array Interface v3: a `stream` other than the consumer's must be synchronised before the
// data is used (1: the legacy default stream, 2: per-thread, 0: not allowed).
void order_cai_stream(nb::handle cai, const std::string& what, void* stream) {
  if (!PyDict_Check(cai.ptr())) return;
  PyObject* st = PyDict_GetItemString(cai.ptr(), "stream");
  if (!st || st == Py_None) return;
  nb::handle h(st);
  if (!PyLong_Check(st) || PyBool_Check(st))
    usage(what, "__cuda_array_interface__ stream is a " + python_type_name(h) +
                    ", not an int (CUDA Array Interface v3)");
  const std::uint64_t producer = int_bits(h, what);
  if (producer == 0)
    usage(what, "__cuda_array_interface__ stream is 0, which the CUDA Array Interface v3 does "
                "not allow (1: the legacy default stream, 2: per-thread)");
  const std::uint64_t consumer = stream ? reinterpret_cast<std::uintptr_t>(stream) : 1;
  if (producer == consumer) return;
  void* p = reinterpret_cast<void*>(static_cast<std::uintptr_t>(producer));
  nb::gil_scoped_release release;
  runtime::make_cuda_driver()->synchronize(p);
}

}  // namespace

std::optional<std::uint64_t> device_pointer(nb::handle value, const std::string& what,
                                            void* stream, int* device) {
  if (device) *device = -1;
  if (nb::hasattr(value, "__cuda_array_interface__")) {
    nb::object cai = value.attr("__cuda_array_interface__");
    nb::object data = cai["data"];
    std::uint64_t p = int_bits(nb::handle(data[0]), what);
    order_cai_stream(cai, what, stream);
    if (device) *device = cai_device(value);
    return p;
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
    DLPackView v = read_dlpack(value, what, nb::int_(dlpack_stream(stream)));
    // Pinned host memory (kDLCUDAHost) is reachable from every device.
    if (device && v.device_type != kDLCUDAHost) *device = v.device_id;
    return v.data;
  }
  return std::nullopt;
}

PackedArgs::PackedArgs(nb::handle args, void* stream, const KernelHandle& kernel,
                       std::size_t entry)
    : stream_(stream) {
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
  check(kernel, entry);
}

void PackedArgs::check(const KernelHandle& kernel, std::size_t entry) const {
  const std::string who = kernel.uri + (kernel.functions.size() > 1
                                            ? " entry " + std::to_string(entry)
                                            : std::string());
  for (std::size_t i = 0; i < count_; ++i) {
    const Packed& p = packed_[i];
    if (p.kind == Kind::Pointer && p.device >= 0 && p.device != kernel.device)
      throw Error(ErrorKind::Usage,
                  "args[" + std::to_string(i) + "]: a " + p.type + " on cuda:" +
                      std::to_string(p.device) + ", but " + kernel.uri + " was loaded for cuda:" +
                      std::to_string(kernel.device) +
                      " (the context current at get); get the kernel with that device current "
                      "(with torch.cuda.device(" + std::to_string(p.device) +
                      "): k = loader.get(uri)) or move the array",
                  {{"argument", "args[" + std::to_string(i) + "]"}, {"uri", kernel.uri}});
  }
  if (entry >= kernel.arguments.size() || !kernel.arguments[entry]) return;  // cannot say
  const std::vector<KernelArgument>& params = *kernel.arguments[entry];
  if (count_ != params.size())
    throw Error(ErrorKind::Usage,
                "args: " + who + " takes " + std::to_string(params.size()) + " argument" +
                    (params.size() == 1 ? "" : "s") + ", " + std::to_string(count_) + " given",
                {{"argument", "args"},
                 {"uri", kernel.uri},
                 {"expected", std::to_string(params.size())},
                 {"actual", std::to_string(count_)}});
  for (std::size_t i = 0; i < count_; ++i) {
    const Packed& p = packed_[i];
    const std::size_t want = params[i].size;
    const std::string what = "args[" + std::to_string(i) + "]";
    auto refuse = [&](const std::string& why) {
      throw Error(ErrorKind::Usage,
                  what + ": " + why + " for parameter " + std::to_string(i) + " of " + who +
                      ", which is " + std::to_string(want) + " byte" + (want == 1 ? "" : "s"),
                  {{"argument", what},
                   {"uri", kernel.uri},
                   {"expected", std::to_string(want)},
                   {"actual", std::to_string(p.kind == Kind::Bytes ? p.size : 8)}});
    };
    if (want > 8)
      refuse("kiln passes values of 1 to 8 bytes (a struct by value is not supported)");
    if (p.kind == Kind::Pointer && want != 8)
      refuse("a device pointer (8 bytes, from a " + p.type + ")");
    if (p.kind == Kind::Bytes && p.size != want)
      refuse("a " + std::to_string(p.size) + "-byte " + p.type);
    if (p.kind == Kind::Int && want < 8) {
      std::uint64_t bits = 0;
      std::memcpy(&bits, slots_[i].data(), 8);
      const unsigned width = static_cast<unsigned>(want * 8);
      const bool fits = p.negative
                            ? static_cast<std::int64_t>(bits) >= -(std::int64_t{1} << (width - 1))
                            : bits <= (std::uint64_t{1} << width) - 1;
      if (!fits) {
        const std::int64_t lo = -(std::int64_t{1} << (width - 1));
        const std::uint64_t hi = (std::uint64_t{1} << width) - 1;
        refuse("the int " +
               (p.negative ? std::to_string(static_cast<std::int64_t>(bits))
                           : std::to_string(bits)) +
               " does not fit (" + std::to_string(lo) + " to " + std::to_string(hi) + ")");
      }
    }
  }
}

void PackedArgs::pack(std::size_t i, nb::handle value) {
  unsigned char* slot = slots_[i].data();
  Packed& p = packed_[i];
  auto put_int = [&](const std::string& what) {
    std::uint64_t bits = int_bits(value, what);
    std::memcpy(slot, &bits, sizeof(bits));
    p.kind = Kind::Int;
    p.negative = PyObject_RichCompareBool(value.ptr(), nb::int_(0).ptr(), Py_LT) == 1;
    p.type = "int";
  };
  if (PyLong_CheckExact(value.ptr())) {  // the hot path: device pointers
    put_int("args[" + std::to_string(i) + "]");
    return;
  }
  const std::string what = "args[" + std::to_string(i) + "]";
  if (nb::isinstance<Scalar>(value)) {
    const Scalar& s = nb::cast<const Scalar&>(value);
    std::memcpy(slot, s.bytes.data(), s.size);
    p.kind = Kind::Bytes;
    p.size = s.size;
    p.type = "kiln." + s.type;
    return;
  }
  if (PyBool_Check(value.ptr()))
    usage(what, "a bool has no kernel type: pass kiln.u8(int(b)) or kiln.i32(int(b))");
  // NumPy scalars (numpy.float64 is a float subclass) and host arrays, by the buffer protocol.
  if (!PyFloat_CheckExact(value.ptr())) {
    if (std::size_t n = copy_scalar_buffer(value, what, slot)) {
      p.kind = Kind::Bytes;
      p.size = n;
      p.type = python_type_name(value);
      return;
    }
  }
  if (PyFloat_Check(value.ptr()))
    usage(what, "a float needs a type: kiln.f32(x), kiln.f64(x) or numpy.float32(x)");
  if (PyLong_Check(value.ptr())) {  // an int subclass (an IntEnum)
    put_int(what);
    return;
  }
  int device = -1;
  if (std::optional<std::uint64_t> ptr = device_pointer(value, what, stream_, &device)) {
    std::memcpy(slot, &*ptr, sizeof(*ptr));
    p.kind = Kind::Pointer;
    p.device = device;
    p.type = python_type_name(value);
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
  if (PyLong_Check(stream.ptr()) && !PyBool_Check(stream.ptr())) {
    handle = nb::borrow(stream);
  } else if (nb::hasattr(stream, "__cuda_stream__")) {
    nb::object t = stream.attr("__cuda_stream__")();
    if (!PyTuple_Check(t.ptr()) || PyTuple_Size(t.ptr()) != 2)
      usage("stream", "__cuda_stream__() of a " + python_type_name(stream) +
                          " gave no (version, handle) tuple");
    nb::handle version = PyTuple_GetItem(t.ptr(), 0);
    if (!PyLong_CheckExact(version.ptr()) || nb::cast<long long>(version) != 0)
      usage("stream", "__cuda_stream__() of a " + python_type_name(stream) + " is version " +
                          nb::cast<std::string>(nb::repr(version)) +
                          "; kiln reads version 0 of the protocol");
    handle = nb::borrow(PyTuple_GetItem(t.ptr(), 1));
  } else if (nb::hasattr(stream, "cuda_stream")) {
    handle = stream.attr("cuda_stream");
  } else {
    usage("stream", "a " + python_type_name(stream) +
                        " is no stream: pass None, a CUstream as int, or an object with "
                        "cuda_stream (torch.cuda.Stream) or __cuda_stream__ (CuPy, cuda.core)");
  }
  if (!PyLong_Check(handle.ptr()) || PyBool_Check(handle.ptr()))
    usage("stream", "the handle of a " + python_type_name(stream) + " is a " +
                        python_type_name(handle) + ", not an int");
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(int_bits(handle, "stream")));
}

void* launch_stream(nb::handle stream, nb::handle args) {
  if (!stream.is_none()) return stream_handle(stream);
  // Only arrays can say which framework's stream is current: a launch of ints and scalars
  // (the hot path) needs no Python call.
  bool arrays = false;
  if (PyList_Check(args.ptr()) || PyTuple_Check(args.ptr())) {
    const Py_ssize_t n = PySequence_Size(args.ptr());
    for (Py_ssize_t i = 0; i < n && !arrays; ++i) {
      nb::object item = nb::steal(PySequence_GetItem(args.ptr(), i));
      if (!item) throw nb::python_error();
      arrays = !PyLong_Check(item.ptr()) && !PyFloat_Check(item.ptr()) &&
               !nb::isinstance<Scalar>(item);
    }
  }
  if (!arrays) return nullptr;
  nb::object s = nb::module_::import_("kiln._arrays").attr("default_stream")(args);
  return stream_handle(s);
}

Loader::Dim3 dim3(nb::handle value, const char* name) {
  unsigned d[3] = {1, 1, 1};
  const std::uint64_t max = std::numeric_limits<unsigned>::max();
  if (PyIndex_Check(value.ptr()) && !PyBool_Check(value.ptr())) {
    d[0] = static_cast<unsigned>(index_in_range(value, name, 1, max));
  } else {
    if (!PySequence_Check(value.ptr()) || PyUnicode_Check(value.ptr()) ||
        PyBool_Check(value.ptr()))
      usage(name, "takes an int or a tuple of 1 to 3 ints, not a " + python_type_name(value));
    Py_ssize_t n = PySequence_Size(value.ptr());
    if (n < 0) throw nb::python_error();
    if (n < 1 || n > 3) usage(name, "takes 1 to 3 dimensions, got " + std::to_string(n));
    for (Py_ssize_t k = 0; k < n; ++k)
      d[k] = static_cast<unsigned>(
          index_in_range(nb::steal(PySequence_GetItem(value.ptr(), k)),
                         std::string(name) + "[" + std::to_string(k) + "]", 1, max));
  }
  return {d[0], d[1], d[2]};
}

}  // namespace kiln::python
