#pragma once
// The counters behind Loader::stats() (kiln::LoaderStats, kiln/loader.hpp), incremented where
// each tier decides, and the process's one summary line at exit (KILN_LOG=info).
//
// Cheap enough to leave on: every counter is a relaxed atomic, nothing takes a lock on a get.
// The warm get's counter is split into cache-line shards, one per thread (ThreadShard, held by
// the thread's hit cache): a thread alone on its shard adds with a plain load and store, no
// read-modify-write, and threads hitting the same Loader never pass a cache line between them.
// Threads beyond kShards alive at once share one more shard, with fetch_add. A snapshot adds
// the shards up.
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "kiln/error.hpp"
#include "kiln/loader.hpp"

namespace kiln {

class LoaderCounters {
 public:
  enum class Tier { Store, Mirror, Jit };
  static constexpr std::size_t kShards = 32;

  // A thread's warm-get shard, for every Loader: its own while it lives (given back when the
  // thread ends), or the shared one when kShards threads hold one already.
  class ThreadShard {
   public:
    ThreadShard() noexcept;
    ~ThreadShard();
    ThreadShard(const ThreadShard&) = delete;
    ThreadShard& operator=(const ThreadShard&) = delete;
    unsigned index() const noexcept { return index_; }

   private:
    unsigned index_;  // < kShards: this thread's alone; kShards: the shared one
  };

  void memory_hit(const ThreadShard& t) noexcept {
    Counter& c = memory_[t.index()].n;
    if (t.index() < kShards)
      c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);  // only writer
    else
      c.fetch_add(1, std::memory_order_relaxed);
  }
  void hit(Tier t) noexcept { add(tier(t).hits, 1); }
  void miss() noexcept { add(misses_, 1); }
  void read(std::uint64_t bytes) noexcept { add(bytes_read_, bytes); }
  void verified(std::uint64_t bytes) noexcept { add(bytes_verified_, bytes); }
  void fetched(std::uint64_t bytes) noexcept { add(bytes_fetched_, bytes); }
  void jit_compile() noexcept { add(jit_compiles_, 1); }
  void rejected(ErrorKind kind) noexcept;

  // Times one tier's attempt, served or not, from construction to destruction.
  class TierTimer {
   public:
    TierTimer(LoaderCounters& c, Tier t) noexcept
        : c_(c), t_(t), start_(std::chrono::steady_clock::now()) {}
    ~TierTimer() {
      c_.add(c_.tier(t_).ns, static_cast<std::uint64_t>(
                                 std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now() - start_)
                                     .count()));
    }
    TierTimer(const TierTimer&) = delete;
    TierTimer& operator=(const TierTimer&) = delete;

   private:
    LoaderCounters& c_;
    Tier t_;
    std::chrono::steady_clock::time_point start_;
  };

  LoaderStats snapshot() const;

 private:
  using Counter = std::atomic<std::uint64_t>;
  struct alignas(64) Shard {
    Counter n{0};
  };
  struct PerTier {
    Counter hits{0}, ns{0};
  };
  static void add(Counter& c, std::uint64_t v) noexcept {
    c.fetch_add(v, std::memory_order_relaxed);
  }
  PerTier& tier(Tier t) noexcept { return tiers_[static_cast<int>(t)]; }

  std::array<Shard, kShards + 1> memory_;  // [kShards]: the shared shard
  alignas(64) std::array<PerTier, 3> tiers_;
  Counter misses_{0}, bytes_read_{0}, bytes_verified_{0}, bytes_fetched_{0}, jit_compiles_{0};
  std::array<Counter, static_cast<int>(ErrorKind::Limit) + 1> rejected_{};
};

// The process's Loaders, for the line at exit. A Loader registers its counters when it is made
// (the first one also arranges the line at exit) and retires them when it is destroyed: their
// counts stay in the process total. The registry is never destroyed, so the line at exit reads
// it whatever else static destruction has already taken down; a process that never made a
// Loader arranges nothing and prints nothing.
std::shared_ptr<LoaderCounters> register_loader_counters();
void retire_loader_counters(const std::shared_ptr<LoaderCounters>& counters) noexcept;

// The line at exit for `total`, the sum of `loaders` Loaders' statistics (without "kiln [info]").
std::string exit_summary(const LoaderStats& total, std::size_t loaders);

}  // namespace kiln
