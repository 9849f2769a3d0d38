#pragma once
// What every typed op shares (kiln/ops.hpp). The ops themselves are generated from the one table,
// loader/ops_table.py, by cmake/gen_ops.py (ops.cpp in the build tree): each is a sequence of
// these checks, its URI, log_call and launch. This file and op_support.cpp are the only ones the
// generated ops reach the core through (the driver, the API log).
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "kiln/loader.hpp"
#include "kiln/ops.hpp"

namespace kiln::ops::detail {

// ---- Checks: each throws Error{Usage} "kiln::ops::OP: ..." naming the argument ---------------
[[noreturn]] void usage(const char* op, const std::string& what);
// dtype is a DType at all, and one the family is built for.
void require_dtype(const char* op, DType dtype, std::initializer_list<DType> built);
void require_pointer(const char* op, const char* name, const void* p);
void require_positive(const char* op, const char* name, long long v);
// Bytes of a x b elements of `elem` bytes; refused naming `what` when that overflows.
std::size_t checked_bytes(const char* op, const char* what, long long a, long long b,
                          std::size_t elem);
void require_aligned(const char* op, const char* name, const void* p, std::size_t align,
                     const char* why);
// A workspace of `bytes` holds at least `needed` (the public function `fn` says how much).
void require_workspace(const char* op, const char* name, std::size_t bytes, std::size_t needed,
                       const char* fn);
// [a, a + na) and [b, b + nb) do not overlap; with same_allowed, a == b is allowed too.
void require_apart(const char* op, const char* a_name, const void* a, std::size_t na,
                   const char* b_name, const void* b, std::size_t nb, bool same_allowed);
void require_finite_nonneg(const char* op, const char* name, float v);

// ---- Geometry helpers the table's snippets use ----------------------------------------------
constexpr long long kMaxGridX = 65535;  // row kernels stride over rows, so any grid works
unsigned grid_rows(long long rows);     // rows, at most kMaxGridX
unsigned ceil_div(long long a, long long b);
int gemm_tile(int dim);  // 128 for dim >= 2048, else 64
// The integer after "_KEY_" in a URI (gemm_f32_bm_64_bn_128_bk_8: bm = 64), 0 when absent.
int uri_param(const std::string& uri, const char* key);

// ---- The KILN_API_LOG line: level 1 the op's name, level 2 with its arguments ----------------
// if (logging()) log_call(op, {{"uri", uri}, {"n", show(n)}}): the arguments are formatted only
// when the log is on (KILN_API_LOG, LoaderConfig::api_log).
bool logging();
void log_call(const char* op, std::initializer_list<std::pair<const char*, std::string>> args);
std::string show(const void* p);
std::string show(int v);
std::string show(long long v);
std::string show(std::size_t v);
std::string show(float v);
std::string show(DType v);

// ---- Get and launch --------------------------------------------------------------------------
// One launch of the kernel's entry `entry`.
struct Step {
  // args: the arguments' addresses, as many as the entry's parameters (a launch with another
  // count is refused where the driver reports the kernel's parameters).
  template <std::size_t N>
  Step(std::size_t e, Launch g, void* (&a)[N]) : entry(e), geometry(g), args(a), count(N) {}
  std::size_t entry;
  Launch geometry;
  void** args;
  std::size_t count;
};
// Gets the reference package's uri (refusing a loader of another package) and launches each
// step on it; every entry is resolved before the first launch.
void launch(Loader& loader, const std::string& uri, void* stream, std::initializer_list<Step> steps);
void launch(Loader& loader, const KernelHandle& kernel, void* stream,
            std::initializer_list<Step> steps);
// The first of choose(cc of the loader's device) that loads, its URI into `uri`. A candidate
// before the last is used only from an AOT build (an NVRTC build targets sm_90, not an
// arch-specific sm_90a); one that misses (not found, unsupported, a driver failure, a JIT build)
// is logged as a warning with its reason and not tried again for this loader and context.
const KernelHandle& get_first_usable(Loader& loader, const char* op, void* stream,
                                     const std::function<std::vector<std::string>(int cc)>& choose,
                                     std::string& uri);

}  // namespace kiln::ops::detail
