// Loader statistics: the counters' snapshot, LoaderStats' JSON form, and the line at exit.
#include "loader_stats.hpp"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>

#include "runtime/environment.hpp"
#include "runtime/log.hpp"

namespace kiln {

namespace {

constexpr int kStatsFormat = 1;
constexpr int kKinds = static_cast<int>(ErrorKind::Limit) + 1;

// The warm-get shards not held by a live thread. Never destroyed: threads end (and give theirs
// back) during static destruction too.
struct FreeShards {
  std::mutex mu;
  std::vector<unsigned> free = reserved();
  unsigned next = 0;
  static std::vector<unsigned> reserved() {
    std::vector<unsigned> v;
    v.reserve(LoaderCounters::kShards);
    return v;
  }  // shards never handed out yet: next .. kShards - 1
};
FreeShards& free_shards() {
  static FreeShards* f = new FreeShards;
  return *f;
}

void add_into(LoaderStats& to, const LoaderStats& x) {
  to.memory_hits += x.memory_hits;
  to.store_hits += x.store_hits;
  to.mirror_hits += x.mirror_hits;
  to.jit_hits += x.jit_hits;
  to.misses += x.misses;
  to.bytes_read += x.bytes_read;
  to.bytes_verified += x.bytes_verified;
  to.bytes_fetched += x.bytes_fetched;
  to.store_ns += x.store_ns;
  to.mirror_ns += x.mirror_ns;
  to.jit_ns += x.jit_ns;
  to.jit_compiles += x.jit_compiles;
  for (const auto& [k, v] : x.rejected) to.rejected[k] += v;
}

LoaderStats zero_stats() {
  LoaderStats s;
  for (int k = 0; k < kKinds; ++k) s.rejected[to_string(static_cast<ErrorKind>(k))] = 0;
  return s;
}

// Never destroyed (see loader_stats.hpp): the line at exit may run after every other static of
// the library is gone.
struct Registry {
  std::mutex mu;
  std::vector<std::shared_ptr<LoaderCounters>> live;
  LoaderStats retired = zero_stats();
  std::size_t made = 0;
};

Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

void print_exit_summary() noexcept {
  try {
    if (!runtime::log_enabled(runtime::LogLevel::Info)) return;
    Registry& r = registry();
    LoaderStats total;
    std::size_t made = 0;
    {
      std::lock_guard<std::mutex> lock(r.mu);
      total = r.retired;
      for (const auto& c : r.live) add_into(total, c->snapshot());
      made = r.made;
    }
    runtime::log_write(runtime::LogLevel::Info, exit_summary(total, made));
  } catch (...) {
    // A line that cannot be written (out of memory at exit) is not worth a crash.
  }
}

std::string ms(std::uint64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", static_cast<double>(ns) / 1e6);
  return buf;
}

}  // namespace

LoaderCounters::ThreadShard::ThreadShard() noexcept : index_(kShards) {
  FreeShards& f = free_shards();
  std::lock_guard<std::mutex> lock(f.mu);
  if (!f.free.empty()) {
    index_ = f.free.back();
    f.free.pop_back();
  } else if (f.next < kShards) {
    index_ = f.next++;
  }
}

LoaderCounters::ThreadShard::~ThreadShard() {
  if (index_ >= kShards) return;
  FreeShards& f = free_shards();
  std::lock_guard<std::mutex> lock(f.mu);
  f.free.push_back(index_);  // reserved for kShards entries: never allocates
}

void LoaderCounters::rejected(ErrorKind kind) noexcept {
  const int k = static_cast<int>(kind);
  if (k >= 0 && k < kKinds) add(rejected_[k], 1);
}

LoaderStats LoaderCounters::snapshot() const {
  auto get = [](const Counter& c) { return c.load(std::memory_order_relaxed); };
  LoaderStats s;
  for (const Shard& sh : memory_) s.memory_hits += get(sh.n);
  s.store_hits = get(tiers_[0].hits);
  s.mirror_hits = get(tiers_[1].hits);
  s.jit_hits = get(tiers_[2].hits);
  s.store_ns = get(tiers_[0].ns);
  s.mirror_ns = get(tiers_[1].ns);
  s.jit_ns = get(tiers_[2].ns);
  s.misses = get(misses_);
  s.bytes_read = get(bytes_read_);
  s.bytes_verified = get(bytes_verified_);
  s.bytes_fetched = get(bytes_fetched_);
  s.jit_compiles = get(jit_compiles_);
  for (int k = 0; k < kKinds; ++k) s.rejected[to_string(static_cast<ErrorKind>(k))] = get(rejected_[k]);
  return s;
}

std::shared_ptr<LoaderCounters> register_loader_counters() {
  static std::once_flag exit_once;
  std::call_once(exit_once, [] {
    // What the line at exit reads is made before it is arranged, so it is destroyed after the
    // line is written: the log level, and the table of variables the log's sink is read from.
    runtime::env_variables();
    runtime::log_enabled(runtime::LogLevel::Info);
    registry();
    std::atexit(print_exit_summary);
  });
  auto c = std::make_shared<LoaderCounters>();
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.live.push_back(c);
  ++r.made;
  return c;
}

void retire_loader_counters(const std::shared_ptr<LoaderCounters>& counters) noexcept {
  if (!counters) return;
  Registry& r = registry();
  try {
    LoaderStats s = counters->snapshot();
    std::lock_guard<std::mutex> lock(r.mu);
    add_into(r.retired, s);
    for (auto it = r.live.begin(); it != r.live.end(); ++it)
      if (*it == counters) {
        r.live.erase(it);
        break;
      }
  } catch (...) {
    // Out of memory in a destructor: the counters stay registered (they are still counted).
  }
}

std::string exit_summary(const LoaderStats& t, std::size_t loaders) {
  std::uint64_t rejected = 0;
  std::string reasons;
  for (const auto& [kind, n] : t.rejected) {
    if (n == 0) continue;
    rejected += n;
    reasons += (reasons.empty() ? "" : ", ") + kind + " " + std::to_string(n);
  }
  const std::uint64_t gets = t.memory_hits + t.store_hits + t.mirror_hits + t.jit_hits + t.misses;
  std::string line = "loader statistics at exit (" + std::to_string(loaders) +
                     (loaders == 1 ? " loader" : " loaders") + "): " + std::to_string(gets) +
                     " gets; hits: memory " + std::to_string(t.memory_hits) + ", store " +
                     std::to_string(t.store_hits) + ", mirror " + std::to_string(t.mirror_hits) +
                     ", jit " + std::to_string(t.jit_hits) + "; misses " +
                     std::to_string(t.misses) + "; bytes read " + std::to_string(t.bytes_read) +
                     ", verified " + std::to_string(t.bytes_verified) + ", fetched " +
                     std::to_string(t.bytes_fetched) + "; time: store " + ms(t.store_ns) +
                     ", mirror " + ms(t.mirror_ns) + ", jit " + ms(t.jit_ns) +
                     "; JIT compiles " + std::to_string(t.jit_compiles) + "; rejected " +
                     std::to_string(rejected);
  if (!reasons.empty()) line += " (" + reasons + ")";
  return line;
}

LoaderStats LoaderStats::since(const LoaderStats& earlier) const {
  auto minus = [](std::uint64_t a, std::uint64_t b) { return a >= b ? a - b : 0; };
  LoaderStats d = *this;
  d.memory_hits = minus(memory_hits, earlier.memory_hits);
  d.store_hits = minus(store_hits, earlier.store_hits);
  d.mirror_hits = minus(mirror_hits, earlier.mirror_hits);
  d.jit_hits = minus(jit_hits, earlier.jit_hits);
  d.misses = minus(misses, earlier.misses);
  d.bytes_read = minus(bytes_read, earlier.bytes_read);
  d.bytes_verified = minus(bytes_verified, earlier.bytes_verified);
  d.bytes_fetched = minus(bytes_fetched, earlier.bytes_fetched);
  d.store_ns = minus(store_ns, earlier.store_ns);
  d.mirror_ns = minus(mirror_ns, earlier.mirror_ns);
  d.jit_ns = minus(jit_ns, earlier.jit_ns);
  d.jit_compiles = minus(jit_compiles, earlier.jit_compiles);
  for (auto& [k, v] : d.rejected) {
    auto it = earlier.rejected.find(k);
    if (it != earlier.rejected.end()) v = minus(v, it->second);
  }
  return d;
}

std::string LoaderStats::json() const {
  nlohmann::ordered_json j;
  j["stats_format"] = kStatsFormat;
  j["hits"] = {{"memory", memory_hits}, {"store", store_hits}, {"mirror", mirror_hits},
               {"jit", jit_hits}};
  j["misses"] = misses;
  j["bytes"] = {{"read", bytes_read}, {"verified", bytes_verified}, {"fetched", bytes_fetched}};
  j["time_ns"] = {{"store", store_ns}, {"mirror", mirror_ns}, {"jit", jit_ns}};
  j["jit_compiles"] = jit_compiles;
  nlohmann::ordered_json r = nlohmann::ordered_json::object();
  for (int k = 0; k < kKinds; ++k) {
    const char* name = to_string(static_cast<ErrorKind>(k));
    auto it = rejected.find(name);
    r[name] = it == rejected.end() ? 0 : it->second;
  }
  j["rejected"] = std::move(r);
  return j.dump();
}

}  // namespace kiln
