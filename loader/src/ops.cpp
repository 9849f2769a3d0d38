// Typed kernel API (kiln/ops.hpp): validate, choose the URI, log, get, launch.
// Launch geometry follows the table at the top of each kernels/*.cu file.
#include "kiln/ops.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <utility>

#include "kiln/error.hpp"
#include "kiln/kernels.h"
#include "loader_access.hpp"
#include "runtime/driver.hpp"
#include "runtime/log.hpp"

namespace kiln::ops {

namespace {

// kernels/reduce_sum.cu: KILN_REDUCE_BLOCKS x KILN_REDUCE_THREADS, one float per block.
constexpr unsigned kReduceBlocks = 256;
constexpr unsigned kReduceThreads = 256;
constexpr unsigned kMaxGridX = 65535;  // row kernels stride over rows, so any grid works

[[noreturn]] void usage(const char* op, const std::string& what) {
  throw Error(ErrorKind::Usage, std::string("kiln::ops::") + op + ": " + what);
}

void require_pointer(const char* op, const char* name, const void* p) {
  if (!p) usage(op, std::string(name) + " is null");
}

void require_positive(const char* op, const char* name, long long v) {
  if (v <= 0) usage(op, std::string(name) + " = " + std::to_string(v) + " must be > 0");
}

void require_aligned(const char* op, const char* name, const void* p, std::size_t align,
                     const char* why) {
  if (reinterpret_cast<std::uintptr_t>(p) % align != 0)
    usage(op, std::string(name) + " (" + std::to_string(reinterpret_cast<std::uintptr_t>(p)) +
                  ") is not " + std::to_string(align) + "-byte aligned (" + why + ")");
}

// Bytes of `count` elements of `elem` bytes; Usage error when that overflows the address space.
std::size_t checked_bytes(const char* op, const char* what, long long a, long long b,
                          std::size_t elem) {
  const auto max = static_cast<unsigned long long>(std::numeric_limits<std::ptrdiff_t>::max());
  const auto ua = static_cast<unsigned long long>(a), ub = static_cast<unsigned long long>(b);
  if (ub != 0 && ua > max / ub / elem)
    usage(op, std::string(what) + " = " + std::to_string(a) + " x " + std::to_string(b) +
                  " elements overflows the address space");
  return static_cast<std::size_t>(ua * ub * elem);
}

bool overlap(const void* a, std::size_t na, const void* b, std::size_t nb) {
  auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  return x < y + nb && y < x + na;
}

void require_dtype(const char* op, DType dtype, bool allow_f32) {
  if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16)
    usage(op, "dtype " + std::to_string(static_cast<int>(dtype)) + " is not f32, f16 or bf16");
  if (!allow_f32 && dtype == DType::F32)
    usage(op, "dtype f32 is not built for this family (f16 and bf16 are)");
}

std::string ptr(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

unsigned grid_rows(long long rows) {
  return static_cast<unsigned>(rows < kMaxGridX ? rows : kMaxGridX);
}

unsigned ceil_div(long long a, long long b) { return static_cast<unsigned>((a + b - 1) / b); }

int gemm_tile(int dim) { return dim >= 2048 ? 128 : 64; }

// The typed functions know the reference package's URIs and launch shapes: a loader of another
// package would load someone else's kernel under one of those names.
void require_reference(const Loader& loader, const std::string& uri) {
  const char* name = loader.package().name;
  if (std::strcmp(name, KILN_KERNELS_PACKAGE_NAME) != 0)
    throw Error(ErrorKind::Usage, "kiln::ops launch the reference package " +
                                      std::string(KILN_KERNELS_PACKAGE_NAME) + "'s kernels (" +
                                      uri + "); this loader serves package " + name +
                                      ": create one with kiln_kernels_package() (kiln/kernels.h)")
        .with("package", name);
}

void launch_one(Loader& loader, const std::string& uri, std::size_t entry, const Launch& l,
                void* stream, void** args) {
  require_reference(loader, uri);
  const KernelHandle& k = loader.get(uri, stream);
  loader.launch(k, entry, l.grid, l.block, 0, stream, args);
}

}  // namespace

const char* to_string(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return "f32";
    case DType::F16:
      return "f16";
    case DType::BF16:
      return "bf16";
  }
  return "?";
}

std::size_t element_size(DType dtype) { return dtype == DType::F32 ? 4 : 2; }

std::string choose_uri_axpy(DType dtype) { return std::string("axpy_dtype_") + to_string(dtype); }

std::string choose_uri_reduce_sum(DType dtype) {
  return std::string("reduce_sum_dtype_") + to_string(dtype);
}

// Each thread strides over cols / BLOCK elements; a wider block pays off only once a row has
// several elements per thread (the block reduction costs the same for any row length).
int choose_rmsnorm_block(int cols) { return cols <= 256 ? 128 : cols <= 1024 ? 256 : 512; }

std::string choose_uri_rmsnorm(DType dtype, int cols) {
  return std::string("rmsnorm_dtype_") + to_string(dtype) + "_block_" +
         std::to_string(choose_rmsnorm_block(cols));
}

int choose_softmax_block(int cols) { return cols <= 512 ? 128 : 256; }

std::string choose_uri_softmax(DType dtype, int cols) {
  return std::string("softmax_dtype_") + to_string(dtype) + "_block_" +
         std::to_string(choose_softmax_block(cols));
}

std::string choose_uri_silu_and_mul(DType dtype) {
  return std::string("silu_and_mul_dtype_") + to_string(dtype);
}

// 128-wide tiles only when a dimension is large: small problems need the extra blocks of
// 64-wide tiles to fill the GPU's SMs.
std::string choose_uri_gemm_f32(int M, int N, int /*K*/) {
  return "gemm_f32_bm_" + std::to_string(gemm_tile(M)) + "_bn_" + std::to_string(gemm_tile(N)) +
         "_bk_8";
}

std::vector<std::string> choose_uris_gemm_f16(int M, int N, int /*K*/, int cc) {
  std::vector<std::string> uris;
  if (cc == 90) uris.push_back("hopper_wgmma_bn_" + std::to_string(gemm_tile(N)));
  uris.push_back("gemm_f16_tc_bm_" + std::to_string(gemm_tile(M)) + "_bn_" +
                 std::to_string(gemm_tile(N)));
  return uris;
}

Launch axpy_launch(long long n) {
  long long blocks = (n + 255) / 256;
  return {{static_cast<unsigned>(blocks < kMaxGridX ? blocks : kMaxGridX), 1, 1}, {256, 1, 1}};
}

Launch rmsnorm_launch(int rows, int cols) {
  return {{grid_rows(rows), 1, 1}, {static_cast<unsigned>(choose_rmsnorm_block(cols)), 1, 1}};
}

Launch softmax_launch(int rows, int cols) {
  return {{grid_rows(rows), 1, 1}, {static_cast<unsigned>(choose_softmax_block(cols)), 1, 1}};
}

Launch silu_and_mul_launch(long long rows, int d) {
  int block = d >= 1024 ? 1024 : (d + 31) / 32 * 32;
  return {{grid_rows(rows), 1, 1}, {static_cast<unsigned>(block), 1, 1}};
}

Launch gemm_launch(const std::string& uri, int M, int N) {
  // URIs: gemm_f32_bm_X_bn_Y_bk_8, gemm_f16_tc_bm_X_bn_Y, hopper_wgmma_bn_Y.
  auto param = [&](const std::string& key) {
    auto at = uri.find("_" + key + "_");
    if (at == std::string::npos) return 0;
    return std::atoi(uri.c_str() + at + key.size() + 2);
  };
  if (uri.rfind("hopper_wgmma_", 0) == 0)
    return {{ceil_div(N, param("bn")), ceil_div(M, 64), 1}, {128, 1, 1}};
  int bm = param("bm"), bn = param("bn");
  if (bm <= 0 || bn <= 0) throw Error(ErrorKind::Internal, "gemm_launch: not a GEMM URI: " + uri);
  return {{ceil_div(N, bn), ceil_div(M, bm), 1}, {256, 1, 1}};
}

std::size_t reduce_sum_workspace_bytes() { return kReduceBlocks * sizeof(float); }

void axpy(Loader& loader, void* stream, void* y, const void* x, long long n, float alpha,
          DType dtype) {
  const char* op = "axpy";
  require_dtype(op, dtype, true);
  require_pointer(op, "y", y);
  require_pointer(op, "x", x);
  require_positive(op, "n", n);
  const std::size_t es = element_size(dtype);
  const std::size_t bytes = checked_bytes(op, "n", n, 1, es);
  require_aligned(op, "x", x, es, "element type");
  require_aligned(op, "y", y, es, "element type");
  if (x != y && overlap(x, bytes, y, bytes))
    usage(op, "x and y overlap partially (x == y is allowed; partial overlap is not)");
  std::string uri = choose_uri_axpy(dtype);
  if (runtime::api_log_enabled(2))
    runtime::api_log(op, {{"uri", uri},
                 {"stream", ptr(stream)},
                 {"y", ptr(y)},
                 {"x", ptr(x)},
                 {"n", std::to_string(n)},
                 {"alpha", std::to_string(alpha)},
                 {"dtype", to_string(dtype)}});
  else if (runtime::api_log_enabled(1))
    runtime::api_log(op);
  const void* xp = x;
  void* args[] = {&n, &alpha, &xp, &y};
  launch_one(loader, uri, 0, axpy_launch(n), stream, args);
}

void reduce_sum(Loader& loader, void* stream, void* out, const void* in, long long n,
                void* workspace, std::size_t workspace_bytes, DType dtype) {
  const char* op = "reduce_sum";
  require_dtype(op, dtype, true);
  require_pointer(op, "out", out);
  require_pointer(op, "in", in);
  require_pointer(op, "workspace", workspace);
  require_positive(op, "n", n);
  const std::size_t es = element_size(dtype);
  const std::size_t bytes = checked_bytes(op, "n", n, 1, es);
  require_aligned(op, "in", in, es, "element type");
  require_aligned(op, "out", out, es, "element type");
  require_aligned(op, "workspace", workspace, alignof(float), "float partial sums");
  if (workspace_bytes < reduce_sum_workspace_bytes())
    usage(op, "workspace_bytes = " + std::to_string(workspace_bytes) +
                  " is too small: " + std::to_string(reduce_sum_workspace_bytes()) +
                  " needed (kiln::ops::reduce_sum_workspace_bytes())");
  if (overlap(workspace, reduce_sum_workspace_bytes(), in, bytes) ||
      overlap(workspace, reduce_sum_workspace_bytes(), out, es))
    usage(op, "workspace overlaps in or out");
  std::string uri = choose_uri_reduce_sum(dtype);
  if (runtime::api_log_enabled(2))
    runtime::api_log(op, {{"uri", uri},
                 {"stream", ptr(stream)},
                 {"out", ptr(out)},
                 {"in", ptr(in)},
                 {"n", std::to_string(n)},
                 {"workspace", ptr(workspace)},
                 {"workspace_bytes", std::to_string(workspace_bytes)},
                 {"dtype", to_string(dtype)}});
  else if (runtime::api_log_enabled(1))
    runtime::api_log(op);
  // Both entries are resolved before the first launch, so a failure leaves no half-done sum.
  require_reference(loader, uri);
  const KernelHandle& k = loader.get(uri, stream);
  const void* inp = in;
  float* ws = static_cast<float*>(workspace);
  void* partial_args[] = {&n, &inp, &ws};
  loader.launch(k, 0, {kReduceBlocks, 1, 1}, {kReduceThreads, 1, 1}, 0, stream, partial_args);
  int partials = static_cast<int>(kReduceBlocks);
  const float* wsc = ws;
  void* final_args[] = {&partials, &wsc, &out};
  loader.launch(k, 1, {1, 1, 1}, {kReduceThreads, 1, 1}, 0, stream, final_args);
}

namespace {

// Shared checks of the row-wise families (rmsnorm, softmax): returns the bytes of one matrix.
std::size_t check_rows(const char* op, DType dtype, void* out, const void* in, int rows, int cols) {
  require_dtype(op, dtype, true);
  require_pointer(op, "out", out);
  require_pointer(op, "in", in);
  require_positive(op, "rows", rows);
  require_positive(op, "cols", cols);
  const std::size_t es = element_size(dtype);
  const std::size_t bytes = checked_bytes(op, "rows x cols", rows, cols, es);
  require_aligned(op, "out", out, es, "element type");
  require_aligned(op, "in", in, es, "element type");
  if (out != in && overlap(out, bytes, in, bytes))
    usage(op, "out and in overlap partially (out == in is allowed; partial overlap is not)");
  return bytes;
}

}  // namespace

void rmsnorm(Loader& loader, void* stream, void* out, const void* in, const void* weight, int rows,
             int cols, float eps, DType dtype) {
  const char* op = "rmsnorm";
  std::size_t bytes = check_rows(op, dtype, out, in, rows, cols);
  require_pointer(op, "weight", weight);
  require_aligned(op, "weight", weight, element_size(dtype), "element type");
  if (overlap(weight, static_cast<std::size_t>(cols) * element_size(dtype), out, bytes))
    usage(op, "weight overlaps out");
  if (!std::isfinite(eps) || eps < 0.0f)
    usage(op, "eps = " + std::to_string(eps) + " must be finite and >= 0");
  std::string uri = choose_uri_rmsnorm(dtype, cols);
  if (runtime::api_log_enabled(2))
    runtime::api_log(op, {{"uri", uri},
                 {"stream", ptr(stream)},
                 {"out", ptr(out)},
                 {"in", ptr(in)},
                 {"weight", ptr(weight)},
                 {"rows", std::to_string(rows)},
                 {"cols", std::to_string(cols)},
                 {"eps", std::to_string(eps)},
                 {"dtype", to_string(dtype)}});
  else if (runtime::api_log_enabled(1))
    runtime::api_log(op);
  const void* inp = in;
  const void* wp = weight;
  void* args[] = {&out, &inp, &wp, &rows, &cols, &eps};
  launch_one(loader, uri, 0, rmsnorm_launch(rows, cols), stream, args);
}

void softmax(Loader& loader, void* stream, void* out, const void* in, int rows, int cols,
             DType dtype) {
  const char* op = "softmax";
  check_rows(op, dtype, out, in, rows, cols);
  std::string uri = choose_uri_softmax(dtype, cols);
  if (runtime::api_log_enabled(2))
    runtime::api_log(op, {{"uri", uri},
                 {"stream", ptr(stream)},
                 {"out", ptr(out)},
                 {"in", ptr(in)},
                 {"rows", std::to_string(rows)},
                 {"cols", std::to_string(cols)},
                 {"dtype", to_string(dtype)}});
  else if (runtime::api_log_enabled(1))
    runtime::api_log(op);
  const void* inp = in;
  void* args[] = {&out, &inp, &rows, &cols};
  launch_one(loader, uri, 0, softmax_launch(rows, cols), stream, args);
}

void silu_and_mul(Loader& loader, void* stream, void* out, const void* in, long long rows, int d,
                  DType dtype) {
  const char* op = "silu_and_mul";
  require_dtype(op, dtype, false);
  require_pointer(op, "out", out);
  require_pointer(op, "in", in);
  require_positive(op, "rows", rows);
  require_positive(op, "d", d);
  const std::size_t es = element_size(dtype);
  const std::size_t out_bytes = checked_bytes(op, "rows x d", rows, d, es);
  const std::size_t in_bytes = checked_bytes(op, "rows x 2d", rows, 2LL * d, es);
  require_aligned(op, "out", out, es, "element type");
  require_aligned(op, "in", in, es, "element type");
  if (overlap(out, out_bytes, in, in_bytes)) usage(op, "out overlaps in (not allowed)");
  std::string uri = choose_uri_silu_and_mul(dtype);
  if (runtime::api_log_enabled(2))
    runtime::api_log(op, {{"uri", uri},
                 {"stream", ptr(stream)},
                 {"out", ptr(out)},
                 {"in", ptr(in)},
                 {"rows", std::to_string(rows)},
                 {"d", std::to_string(d)},
                 {"dtype", to_string(dtype)}});
  else if (runtime::api_log_enabled(1))
    runtime::api_log(op);
  const void* inp = in;
  void* args[] = {&out, &inp, &rows, &d};
  launch_one(loader, uri, 0, silu_and_mul_launch(rows, d), stream, args);
}

namespace {

void check_gemm(const char* op, const void* C, const void* A, const void* B, int M, int N, int K,
                std::size_t in_elem) {
  require_pointer(op, "C", C);
  require_pointer(op, "A", A);
  require_pointer(op, "B", B);
  require_positive(op, "M", M);
  require_positive(op, "N", N);
  require_positive(op, "K", K);
  const std::size_t c_bytes = checked_bytes(op, "M x N", M, N, sizeof(float));
  const std::size_t a_bytes = checked_bytes(op, "M x K", M, K, in_elem);
  const std::size_t b_bytes = checked_bytes(op, "K x N", K, N, in_elem);
  require_aligned(op, "C", C, sizeof(float), "float output");
  require_aligned(op, "A", A, in_elem, "element type");
  require_aligned(op, "B", B, in_elem, "element type");
  if (overlap(C, c_bytes, A, a_bytes)) usage(op, "C overlaps A (not allowed)");
  if (overlap(C, c_bytes, B, b_bytes)) usage(op, "C overlaps B (not allowed)");
}

// Per (Loader::id(), context): why the wgmma kernel is not used there, so a miss is paid once.
// Keyed by the loader's id, never its address: a new Loader may be built where a destroyed one
// lived, and must not inherit its verdicts.
std::mutex g_wgmma_mu;
std::map<std::pair<std::uint64_t, void*>, std::string> g_wgmma_unusable;

}  // namespace

void gemm_f32(Loader& loader, void* stream, float* C, const float* A, const float* B, int M, int N,
              int K) {
  const char* op = "gemm_f32";
  check_gemm(op, C, A, B, M, N, K, sizeof(float));
  std::string uri = choose_uri_gemm_f32(M, N, K);
  if (runtime::api_log_enabled(2))
    runtime::api_log(op, {{"uri", uri},
                 {"stream", ptr(stream)},
                 {"C", ptr(C)},
                 {"A", ptr(A)},
                 {"B", ptr(B)},
                 {"M", std::to_string(M)},
                 {"N", std::to_string(N)},
                 {"K", std::to_string(K)}});
  else if (runtime::api_log_enabled(1))
    runtime::api_log(op);
  void* args[] = {&M, &N, &K, &A, &B, &C};
  launch_one(loader, uri, 0, gemm_launch(uri, M, N), stream, args);
}

std::string gemm_f16(Loader& loader, void* stream, float* C, const void* A, const void* B, int M,
                     int N, int K) {
  const char* op = "gemm_f16";
  check_gemm(op, C, A, B, M, N, K, 2);
  require_reference(loader, "gemm_f16");
  // The loader's own driver: the context and device it loads for are the ones asked about here.
  runtime::Driver& drv = LoaderAccess::driver(loader);
  void* ctx = drv.current_context();
  std::vector<std::string> uris = choose_uris_gemm_f16(M, N, K, drv.current_device_cc());
  const KernelHandle* k = nullptr;
  std::string uri;
  for (std::size_t i = 0; i < uris.size() && !k; ++i) {
    uri = uris[i];
    const bool last = i + 1 == uris.size();
    if (!last) {
      std::lock_guard<std::mutex> lock(g_wgmma_mu);
      if (g_wgmma_unusable.count({loader.id(), ctx})) continue;
    }
    if (last) {
      k = &loader.get(uri, stream);
      break;
    }
    std::string why;
    try {
      const KernelHandle& h = loader.get(uri, stream);
      // NVRTC compiles for sm_90, not sm_90a: such an image of the wgmma kernel only traps.
      if (h.origin.rfind("jit:", 0) == 0)
        why = "only a JIT build (sm_90, no wgmma) was found: " + h.origin;
      else
        k = &h;
    } catch (const Error& e) {
      // Usage (a miss during capture), Stale and Integrity are the caller's to fix: no fallback.
      if (e.kind() != ErrorKind::NotFound && e.kind() != ErrorKind::Unsupported &&
          e.kind() != ErrorKind::Driver)
        throw;
      why = e.what();
    }
    if (!k) {
      log(runtime::LogLevel::Warn,
          "gemm_f16: not using " + uri + ", falling back to " + uris.back() + ": " + why);
      std::lock_guard<std::mutex> lock(g_wgmma_mu);
      g_wgmma_unusable[{loader.id(), ctx}] = why;
    }
  }
  if (runtime::api_log_enabled(2))
    runtime::api_log(op, {{"uri", uri},
                 {"stream", ptr(stream)},
                 {"C", ptr(C)},
                 {"A", ptr(A)},
                 {"B", ptr(B)},
                 {"M", std::to_string(M)},
                 {"N", std::to_string(N)},
                 {"K", std::to_string(K)}});
  else if (runtime::api_log_enabled(1))
    runtime::api_log(op);
  void* args[] = {&M, &N, &K, &A, &B, &C};
  Launch l = gemm_launch(uri, M, N);
  loader.launch(*k, 0, l.grid, l.block, 0, stream, args);
  return uri;
}

}  // namespace kiln::ops
