#pragma once
// Where a cold get() spends its time, phase by phase, for the load-path benchmark
// (bench/load_path_bench.cpp, docs/performance.md). Private: not installed, not API.
//
// Off (no sink installed on the calling thread) a PhaseTimer costs a call, one thread-local
// load and one branch; on, two steady_clock reads. Phases are exclusive: a timer nested in
// another one takes its time out of the enclosing phase, so the phases of one get() add up to
// its total.
#include <array>
#include <chrono>
#include <cstdint>

namespace kiln::runtime::cold {

enum class Phase : int {
  LoaderCreate,   // Loader's constructor: config, driver/fs/JIT objects, installed store dir
  Registry,       // the URI looked up in the embedded registry (parsed once per process)
  Context,        // the driver opened (once per process) and the current context and device
  StoreScan,      // store directories listed and archive directories chosen
  ManifestParse,  // manifest.json read and parsed, or found unchanged in the process cache
  Read,           // the artifact read into memory
  Hash,           // its SHA-256 checked against the manifest
  DriverLoad,     // cuLibraryLoadData, kernel count, cuLibraryGetKernel, cuKernelGetFunction
  Other,          // the rest of get(): planning, bookkeeping, the in-process map
  Count
};
constexpr int kPhaseCount = static_cast<int>(Phase::Count);

// Stable names for tables and JSON: "loader_create", "store_scan", ...
const char* phase_name(Phase p);

struct PhaseTimes {
  std::array<std::uint64_t, kPhaseCount> ns{};
  std::uint64_t total() const {
    std::uint64_t t = 0;
    for (auto v : ns) t += v;
    return t;
  }
};

// Installs `sink` for the calling thread (nullptr: timing off); returns the previous sink.
// Times add up in the sink until it is cleared by its owner.
PhaseTimes* set_phase_sink(PhaseTimes* sink) noexcept;

class PhaseTimer {
 public:
  // Out of line: the thread-locals it reads have internal linkage (a thread-local with linkage
  // would be exported by gold, which lays out libkiln; CMakeLists.txt).
  explicit PhaseTimer(Phase p) noexcept;
  ~PhaseTimer() {
    if (on_) stop();
  }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  void stop() noexcept;
  Phase phase_ = Phase::Other;
  bool on_ = false;
  PhaseTimer* parent_ = nullptr;
  std::uint64_t child_ns_ = 0;
  std::chrono::steady_clock::time_point start_{};
};

}  // namespace kiln::runtime::cold
