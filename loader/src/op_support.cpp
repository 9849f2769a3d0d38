// The checks, the log line and the launch every typed op shares (op_support.hpp).
#include "op_support.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>

#include "kiln/error.hpp"
#include "kiln/kernels.h"
#include "loader_access.hpp"
#include "runtime/driver.hpp"
#include "runtime/log.hpp"

namespace kiln::ops::detail {

void usage(const char* op, const std::string& what) {
  throw Error(ErrorKind::Usage, std::string("kiln::ops::") + op + ": " + what);
}

void require_dtype(const char* op, DType dtype, std::initializer_list<DType> built) {
  if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16)
    usage(op, "dtype " + std::to_string(static_cast<int>(dtype)) + " is not f32, f16 or bf16");
  for (DType d : built)
    if (d == dtype) return;
  std::string names;
  for (DType d : built) names += (names.empty() ? "" : " and ") + std::string(to_string(d));
  usage(op, std::string("dtype ") + to_string(dtype) + " is not built for this family (" + names +
                (built.size() == 1 ? " is)" : " are)"));
}

void require_pointer(const char* op, const char* name, const void* p) {
  if (!p) usage(op, std::string(name) + " is null");
}

void require_positive(const char* op, const char* name, long long v) {
  if (v <= 0) usage(op, std::string(name) + " = " + std::to_string(v) + " must be > 0");
}

std::size_t checked_bytes(const char* op, const char* what, long long a, long long b,
                          std::size_t elem) {
  const auto max = static_cast<unsigned long long>(std::numeric_limits<std::ptrdiff_t>::max());
  const auto ua = static_cast<unsigned long long>(a), ub = static_cast<unsigned long long>(b);
  if (ub != 0 && ua > max / ub / elem)
    usage(op, std::string(what) + " = " + std::to_string(a) + " x " + std::to_string(b) +
                  " elements overflows the address space");
  return static_cast<std::size_t>(ua * ub * elem);
}

void require_aligned(const char* op, const char* name, const void* p, std::size_t align,
                     const char* why) {
  if (reinterpret_cast<std::uintptr_t>(p) % align != 0)
    usage(op, std::string(name) + " (" + std::to_string(reinterpret_cast<std::uintptr_t>(p)) +
                  ") is not " + std::to_string(align) + "-byte aligned (" + why + ")");
}

void require_workspace(const char* op, const char* name, std::size_t bytes, std::size_t needed,
                       const char* fn) {
  if (bytes < needed)
    usage(op, std::string(name) + " = " + std::to_string(bytes) + " is too small: " +
                  std::to_string(needed) + " needed (" + fn + ")");
}

void require_apart(const char* op, const char* a_name, const void* a, std::size_t na,
                   const char* b_name, const void* b, std::size_t nb, bool same_allowed) {
  const auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  if (!(x < y + nb && y < x + na)) return;
  const std::string an(a_name), bn(b_name);
  if (!same_allowed)
    usage(op, an + " overlaps " + bn + " (not allowed)");
  if (a != b)
    usage(op, an + " and " + bn + " overlap partially (" + an + " == " + bn +
                  " is allowed; partial overlap is not)");
}

void require_finite_nonneg(const char* op, const char* name, float v) {
  if (!std::isfinite(v) || v < 0.0f)
    usage(op, std::string(name) + " = " + std::to_string(v) + " must be finite and >= 0");
}

unsigned grid_rows(long long rows) {
  return static_cast<unsigned>(rows < kMaxGridX ? rows : kMaxGridX);
}

unsigned ceil_div(long long a, long long b) { return static_cast<unsigned>((a + b - 1) / b); }

int gemm_tile(int dim) { return dim >= 2048 ? 128 : 64; }

int uri_param(const std::string& uri, const char* key) {
  const std::string k = std::string("_") + key + "_";
  const auto at = uri.find(k);
  return at == std::string::npos ? 0 : std::atoi(uri.c_str() + at + k.size());
}

bool logging() { return runtime::api_log_enabled(1); }

void log_call(const char* op, std::initializer_list<std::pair<const char*, std::string>> args) {
  runtime::api_log(op, args);  // level 1 writes the name only
}

std::string show(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}
std::string show(int v) { return std::to_string(v); }
std::string show(long long v) { return std::to_string(v); }
std::string show(std::size_t v) { return std::to_string(v); }
std::string show(float v) { return std::to_string(v); }
std::string show(DType v) { return to_string(v); }

namespace {

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

// Per (op, Loader::id(), context): why a preferred candidate is not used there, so a miss is paid
// once. Keyed by the loader's id, never its address: a new Loader may be built where a destroyed
// one lived, and must not inherit its verdicts.
std::mutex g_unusable_mu;
std::map<std::tuple<std::string, std::uint64_t, void*>, std::string> g_unusable;

}  // namespace

void launch(Loader& loader, const KernelHandle& kernel, void* stream,
            std::initializer_list<Step> steps) {
  for (const Step& s : steps)
    loader.launch(kernel, s.entry, s.geometry.grid, s.geometry.block, 0, stream, s.args,
                  s.count);
}

void launch(Loader& loader, const std::string& uri, void* stream,
            std::initializer_list<Step> steps) {
  require_reference(loader, uri);
  launch(loader, loader.get(uri, stream), stream, steps);
}

const KernelHandle& get_first_usable(Loader& loader, const char* op, void* stream,
                                     const std::function<std::vector<std::string>(int cc)>& choose,
                                     std::string& uri) {
  require_reference(loader, op);
  // The loader's own driver: the context and device it loads for are the ones asked about here.
  runtime::Driver& drv = LoaderAccess::driver(loader);
  void* ctx = drv.current_context();
  const std::vector<std::string> uris = choose(drv.current_device_cc());
  for (std::size_t i = 0; i + 1 < uris.size(); ++i) {
    uri = uris[i];
    {
      std::lock_guard<std::mutex> lock(g_unusable_mu);
      if (g_unusable.count({op, loader.id(), ctx})) continue;
    }
    std::string why;
    try {
      const KernelHandle& h = loader.get(uri, stream);
      // NVRTC compiles for sm_90, not sm_90a: such an image of an arch-specific kernel only traps.
      if (h.origin.rfind("jit:", 0) != 0) return h;
      why = "only a JIT build (sm_90, no wgmma) was found: " + h.origin;
    } catch (const Error& e) {
      // Usage (a miss during capture), Stale and Integrity are the caller's to fix: no fallback.
      if (e.kind() != ErrorKind::NotFound && e.kind() != ErrorKind::Unsupported &&
          e.kind() != ErrorKind::Driver)
        throw;
      why = e.what();
    }
    runtime::log(runtime::LogLevel::Warn,
        std::string(op) + ": not using " + uri + ", falling back to " + uris.back() + ": " + why);
    std::lock_guard<std::mutex> lock(g_unusable_mu);
    g_unusable[{op, loader.id(), ctx}] = why;
  }
  uri = uris.back();
  return loader.get(uri, stream);
}

}  // namespace kiln::ops::detail
