#include "runtime/cold_phases.hpp"

namespace kiln::runtime::cold {

namespace detail {
namespace {
thread_local PhaseTimes* t_sink = nullptr;
thread_local PhaseTimer* t_top = nullptr;
}  // namespace
}  // namespace detail

PhaseTimer::PhaseTimer(Phase p) noexcept {
  if (!detail::t_sink) return;
  phase_ = p;
  on_ = true;
  parent_ = detail::t_top;
  detail::t_top = this;
  start_ = std::chrono::steady_clock::now();
}

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::LoaderCreate:
      return "loader_create";
    case Phase::Registry:
      return "registry";
    case Phase::Context:
      return "context";
    case Phase::StoreScan:
      return "store_scan";
    case Phase::ManifestParse:
      return "manifest_parse";
    case Phase::Read:
      return "read";
    case Phase::Hash:
      return "hash";
    case Phase::DriverLoad:
      return "driver_load";
    case Phase::Other:
    case Phase::Count:
      break;
  }
  return "other";
}

PhaseTimes* set_phase_sink(PhaseTimes* sink) noexcept {
  PhaseTimes* prev = detail::t_sink;
  detail::t_sink = sink;
  detail::t_top = nullptr;
  return prev;
}

void PhaseTimer::stop() noexcept {
  auto elapsed = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                std::chrono::steady_clock::now() - start_)
                                                .count());
  detail::t_top = parent_;
  if (parent_) parent_->child_ns_ += elapsed;
  // The sink may have been removed while this timer ran: then nothing is recorded.
  if (PhaseTimes* sink = detail::t_sink)
    sink->ns[static_cast<int>(phase_)] += elapsed > child_ns_ ? elapsed - child_ns_ : 0;
}

}  // namespace kiln::runtime::cold
