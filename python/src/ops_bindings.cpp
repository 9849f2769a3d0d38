#include "ops_bindings.hpp"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>

#include "kernel_args.hpp"
#include "kiln/error.hpp"
#include "kiln/ops.hpp"
#include "python_loader.hpp"

namespace kiln::python {

using namespace nb::literals;

namespace {

using Ptr = std::uint64_t;

void* as_ptr(Ptr p) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(p)); }

ops::DType dtype_named(const std::string& name) {
  if (name == "f32") return ops::DType::F32;
  if (name == "f16") return ops::DType::F16;
  if (name == "bf16") return ops::DType::BF16;
  throw Error(ErrorKind::Usage, "dtype '" + name + "' is not one of f32, f16, bf16",
              {{"argument", "dtype"}, {"value", name}});
}

// Every op: the GIL is released around the call (get() may read a store, download or JIT).
template <typename F>
void without_gil(F&& f) {
  nb::gil_scoped_release release;
  f();
}

}  // namespace

void bind_ops(nb::module_& m) {
  nb::module_ o = m.def_submodule("_ops", "kiln::ops over device pointers (kiln/ops.py)");
  o.def(
      "axpy",
      [](PythonLoader& pl, nb::handle s, Ptr y, Ptr x, long long n, float alpha,
         const std::string& dt) {
        void* st = stream_handle(s);
        ops::DType d = dtype_named(dt);
        without_gil([&] { ops::axpy(*pl.loader, st, as_ptr(y), as_ptr(x), n, alpha, d); });
      },
      "loader"_a, "stream"_a.none(), "y"_a, "x"_a, "n"_a, "alpha"_a, "dtype"_a);
  o.def(
      "reduce_sum",
      [](PythonLoader& pl, nb::handle s, Ptr out, Ptr in, long long n, Ptr ws, std::size_t ws_bytes,
         const std::string& dt) {
        void* st = stream_handle(s);
        ops::DType d = dtype_named(dt);
        without_gil([&] {
          ops::reduce_sum(*pl.loader, st, as_ptr(out), as_ptr(in), n, as_ptr(ws), ws_bytes, d);
        });
      },
      "loader"_a, "stream"_a.none(), "out"_a, "in_"_a, "n"_a, "workspace"_a, "workspace_bytes"_a,
      "dtype"_a);
  o.def(
      "rmsnorm",
      [](PythonLoader& pl, nb::handle s, Ptr out, Ptr in, Ptr w, int rows, int cols, float eps,
         const std::string& dt) {
        void* st = stream_handle(s);
        ops::DType d = dtype_named(dt);
        without_gil([&] {
          ops::rmsnorm(*pl.loader, st, as_ptr(out), as_ptr(in), as_ptr(w), rows, cols, eps, d);
        });
      },
      "loader"_a, "stream"_a.none(), "out"_a, "in_"_a, "weight"_a, "rows"_a, "cols"_a, "eps"_a,
      "dtype"_a);
  o.def(
      "softmax",
      [](PythonLoader& pl, nb::handle s, Ptr out, Ptr in, int rows, int cols,
         const std::string& dt) {
        void* st = stream_handle(s);
        ops::DType d = dtype_named(dt);
        without_gil([&] { ops::softmax(*pl.loader, st, as_ptr(out), as_ptr(in), rows, cols, d); });
      },
      "loader"_a, "stream"_a.none(), "out"_a, "in_"_a, "rows"_a, "cols"_a, "dtype"_a);
  o.def(
      "silu_and_mul",
      [](PythonLoader& pl, nb::handle s, Ptr out, Ptr in, long long rows, int d,
         const std::string& dt) {
        void* st = stream_handle(s);
        ops::DType t = dtype_named(dt);
        without_gil(
            [&] { ops::silu_and_mul(*pl.loader, st, as_ptr(out), as_ptr(in), rows, d, t); });
      },
      "loader"_a, "stream"_a.none(), "out"_a, "in_"_a, "rows"_a, "d"_a, "dtype"_a);
  o.def(
      "gemm_f32",
      [](PythonLoader& pl, nb::handle s, Ptr c, Ptr a, Ptr b, int M, int N, int K) {
        void* st = stream_handle(s);
        without_gil([&] {
          ops::gemm_f32(*pl.loader, st, static_cast<float*>(as_ptr(c)),
                        static_cast<const float*>(as_ptr(a)), static_cast<const float*>(as_ptr(b)),
                        M, N, K);
        });
      },
      "loader"_a, "stream"_a.none(), "c"_a, "a"_a, "b"_a, "M"_a, "N"_a, "K"_a);
  o.def(
      "gemm_f16",
      [](PythonLoader& pl, nb::handle s, Ptr c, Ptr a, Ptr b, int M, int N, int K) {
        void* st = stream_handle(s);
        std::string uri;
        without_gil([&] {
          uri = ops::gemm_f16(*pl.loader, st, static_cast<float*>(as_ptr(c)), as_ptr(a), as_ptr(b),
                              M, N, K);
        });
        return uri;
      },
      "loader"_a, "stream"_a.none(), "c"_a, "a"_a, "b"_a, "M"_a, "N"_a, "K"_a);
  o.def("reduce_sum_workspace_bytes", &ops::reduce_sum_workspace_bytes);
  o.def("choose_uri_rmsnorm", [](const std::string& dt, int cols) {
    return ops::choose_uri_rmsnorm(dtype_named(dt), cols);
  });
  o.def("choose_uri_softmax", [](const std::string& dt, int cols) {
    return ops::choose_uri_softmax(dtype_named(dt), cols);
  });
  o.def("choose_uris_gemm_f16", &ops::choose_uris_gemm_f16);
}

}  // namespace kiln::python
