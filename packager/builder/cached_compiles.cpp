// `kiln build --cache`: lookups before ninja, stores after it (cached_compiles.hpp).
#include "builder/cached_compiles.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <filesystem>
#include <thread>

#include "io/atomic_file.hpp"
#include "io/limits.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"

namespace kiln::builder {
namespace fs = std::filesystem;

namespace {

// Lookups and stores are network round trips when the cache is remote: this many at once hide
// the latency without opening more connections than a cache server expects from one client.
constexpr unsigned kCacheThreads = 8;

// Runs fn(0..n-1) on up to `threads` threads; the first exception is rethrown after all joined.
template <typename Fn>
void in_parallel(std::size_t n, unsigned threads, Fn fn) {
  std::atomic<std::size_t> next{0};
  std::exception_ptr first;
  std::mutex m;
  auto work = [&] {
    for (std::size_t i; (i = next++) < n;) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> g(m);
        if (!first) first = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < std::min<std::size_t>(threads, n); ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (first) std::rethrow_exception(first);
}

std::string escaped(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '\n' ? std::string("\\n") : c == '\\' ? "\\\\" : std::string(1, c);
  return out;
}

std::string nvcc_environment(const BuildOptions& o) {
  std::string s;
  if (!o.nvcc_ccbin.empty()) s += "NVCC_CCBIN=" + o.nvcc_ccbin + "\n";
  if (!o.nvcc_prepend_flags.empty()) s += "NVCC_PREPEND_FLAGS=" + o.nvcc_prepend_flags + "\n";
  if (!o.nvcc_append_flags.empty()) s += "NVCC_APPEND_FLAGS=" + o.nvcc_append_flags + "\n";
  return s;
}

}  // namespace

std::string compile_record_path(const std::string& out_dir, const PlannedArtifact& a) {
  return (fs::path(out_dir) / (a.fatbin + ".key")).string();
}

std::string compile_record(const CompileKey& key, const std::string& fatbin_sha256) {
  std::string s = "kiln compile key 1\nkey " + key.hex + "\nsha256 " + fatbin_sha256 + "\n";
  for (const auto& [tag, value] : key.fields) s += tag + ": " + escaped(value) + "\n";
  return s;
}

std::unique_ptr<CachedCompiles> CachedCompiles::open(const BuildOptions& opts, const project::Registry& reg,
                                                     const BuildPlan& plan,
                                                     const std::string& out_dir,
                                                     const ToolkitInfo& toolkit,
                                                     const std::string& path_env, std::FILE* log,
                                                     std::optional<CacheStats>& stats) {
  result_cache::RemoteBounds bounds;
  bounds.connect_timeout_ms = opts.cache_connect_timeout_ms;
  bounds.request_deadline_ms = opts.cache_request_deadline_ms;
  std::unique_ptr<result_cache::ResultCache> cache;
  try {
    cache = result_cache::open_result_cache(opts.cache, bounds, opts.cache_ca_bundle);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Usage) throw;
    stats = CacheStats{};
    stats->location = opts.cache;
    stats->skipped = e.what();
    if (log) std::fprintf(log, "result cache skipped: %s; compiling instead\n", e.what());
    return nullptr;
  }
  // nvcc: its full version (as before NVRTC, so existing keys stay valid), the host compiler it
  // preprocesses with and its variables. NVRTC: the toolkit's name and full versions; it runs no
  // host compiler and reads no NVCC_* variable.
  CompilerIdentity compiler =
      toolkit.kind == ToolkitInfo::Kind::Nvrtc
          ? CompilerIdentity{toolkit.identity(), "none (NVRTC)", ""}
          : CompilerIdentity{toolkit.full_version, host_compiler_identity(opts.nvcc_ccbin, path_env),
                             nvcc_environment(opts)};
  return std::make_unique<CachedCompiles>(std::move(cache), reg, plan, out_dir, compiler, log);
}

CachedCompiles::CachedCompiles(std::unique_ptr<result_cache::ResultCache> cache, const project::Registry& reg,
                               const BuildPlan& plan, std::string out_dir,
                               const CompilerIdentity& compiler, std::FILE* log)
    : cache_(std::move(cache)), reg_(reg), plan_(plan), out_dir_(std::move(out_dir)), log_(log) {
  stats_.location = cache_->location();
  for (const auto& tp : plan_.targets)
    for (const auto& a : tp.artifacts)
      keys_.emplace(a.fatbin, compile_key(a, *reg_.find(a.uri), plan_.stubs.at(a.stub),
                                          plan_.source_dir, out_dir_, compiler));
}

void CachedCompiles::say(const std::string& line) {
  if (!log_) return;
  std::fprintf(log_, "%s\n", line.c_str());
  std::fflush(log_);
}

void CachedCompiles::drop(const std::string& reason) {
  std::lock_guard<std::mutex> g(mutex_);
  if (!stats_.skipped.empty()) return;
  stats_.skipped = reason;
  say("result cache " + stats_.location + " skipped for the rest of this build: " + reason +
      "; compiling instead");
}

bool CachedCompiles::dropped() {
  std::lock_guard<std::mutex> g(mutex_);
  return !stats_.skipped.empty();
}

bool CachedCompiles::up_to_date(const PlannedArtifact& a) const {
  std::string record;
  try {
    record = io::read_whole_file(compile_record_path(out_dir_, a), io::limits::kMaxLocalFileBytes);
  } catch (const Error&) {
    return false;
  }
  const CompileKey& key = keys_.at(a.fatbin);
  std::string head = "kiln compile key 1\nkey " + key.hex + "\nsha256 ";
  if (record.compare(0, head.size(), head) != 0) return false;
  std::string sha = record.substr(head.size(), 64);
  std::error_code ec;
  fs::path fatbin = fs::path(out_dir_) / a.fatbin;
  if (!fs::is_regular_file(fatbin, ec)) return false;
  try {
    return io::sha256_file(fatbin) == sha;
  } catch (const Error&) {
    return false;
  }
}

CachedCompiles::Found CachedCompiles::look_up(const PlannedArtifact& a) {
  if (dropped()) return Found::Miss;
  const CompileKey& key = keys_.at(a.fatbin);
  result_cache::CacheLookup r = cache_->lookup(key.hex, a.uri + ".fatbin");
  {
    std::lock_guard<std::mutex> g(mutex_);
    stats_.bytes_fetched += r.bytes_fetched;
  }
  std::string refusal;
  switch (r.outcome) {
    case result_cache::CacheLookup::Outcome::Miss:
      return Found::Miss;
    case result_cache::CacheLookup::Outcome::Unavailable:
      drop(r.reason);
      return Found::Miss;
    case result_cache::CacheLookup::Outcome::Refused:
      refusal = r.reason;
      break;
    case result_cache::CacheLookup::Outcome::Hit:
      try {
        // The same check as a fresh compile's: one image, the target, every entry.
        check_compile_result(r.bytes, stats_.location + "/" + result_cache::action_path(key.hex), a.uri, a.target,
                             reg_.find(a.uri)->entries);
      } catch (const Error& e) {
        refusal = e.what();
      }
      break;
  }
  if (!refusal.empty()) {
    std::lock_guard<std::mutex> g(mutex_);
    ++stats_.refused;
    say("result cache entry for " + a.uri + " " + a.target.str() + " refused: " + refusal +
        "; compiling it");
    return Found::Miss;
  }
  io::write_file_atomically(fs::path(out_dir_) / a.fatbin, r.bytes);
  write_record(a, io::sha256_hex(r.bytes));
  return Found::Hit;
}

void CachedCompiles::write_record(const PlannedArtifact& a, const std::string& sha256) const {
  io::write_file_atomically(compile_record_path(out_dir_, a),
                        compile_record(keys_.at(a.fatbin), sha256));
}

BuildPlan CachedCompiles::consult() {
  auto t0 = std::chrono::steady_clock::now();
  std::vector<const PlannedArtifact*> todo;
  for (const auto& tp : plan_.targets)
    for (const auto& a : tp.artifacts) {
      if (up_to_date(a))
        ++stats_.up_to_date;
      else
        todo.push_back(&a);
    }
  std::vector<Found> found(todo.size(), Found::Miss);
  in_parallel(todo.size(), kCacheThreads, [&](std::size_t i) { found[i] = look_up(*todo[i]); });

  std::set<std::string> misses;
  for (std::size_t i = 0; i < todo.size(); ++i) {
    if (found[i] == Found::Hit) {
      ++stats_.hits;
      continue;
    }
    ++stats_.misses;
    misses.insert(todo[i]->fatbin);
    // What --out holds for a miss is not known to match its key: ninja must compile it again.
    std::error_code ec;
    fs::remove(fs::path(out_dir_) / todo[i]->fatbin, ec);
    fs::remove(compile_record_path(out_dir_, *todo[i]), ec);
  }
  BuildPlan compile = plan_;
  compile.stubs.clear();
  for (auto& tp : compile.targets) {
    auto& arts = tp.artifacts;
    arts.erase(std::remove_if(arts.begin(), arts.end(),
                              [&](const PlannedArtifact& a) { return !misses.count(a.fatbin); }),
               arts.end());
    std::set<std::string> passes;
    for (const auto& a : arts) {
      compile.stubs[a.stub] = plan_.stubs.at(a.stub);
      if (!a.pass.empty()) passes.insert(a.pass);
    }
    // A pass runs only for the misses it feeds; it still compiles its whole group, so their
    // bytes are those of a build without the cache.
    tp.passes.erase(std::remove_if(tp.passes.begin(), tp.passes.end(),
                                   [&](const PlannedPass& p) { return !passes.count(p.ptx); }),
                    tp.passes.end());
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  char line[512];
  std::snprintf(line, sizeof line,
                "result cache %s: %zu hits, %zu to compile, %zu up to date (%llu bytes fetched "
                "in %.2f s)",
                stats_.location.c_str(), stats_.hits, stats_.misses, stats_.up_to_date,
                static_cast<unsigned long long>(stats_.bytes_fetched), secs);
  say(line);
  return compile;
}

void CachedCompiles::store(const PlannedArtifact& a, const std::string& bytes) {
  {
    std::lock_guard<std::mutex> g(mutex_);
    if (stores_dropped_ || !stats_.skipped.empty()) return;
  }
  result_cache::CacheStore r = cache_->store(keys_.at(a.fatbin).hex, a.uri + ".fatbin", bytes);
  std::lock_guard<std::mutex> g(mutex_);
  if (r.ok) {
    ++stats_.stored;
    stats_.bytes_stored += r.bytes_stored;
  } else if (!stores_dropped_) {
    stores_dropped_ = true;
    say("result cache " + stats_.location +
        ": not storing results any more in this build: " + r.reason);
  }
}

void CachedCompiles::keep_compiled(const BuildPlan& compiled,
                                   const std::set<std::string>& failed_outputs) {
  struct Result {
    const PlannedArtifact* artifact;
    std::string bytes;
  };
  std::vector<Result> results;
  for (const auto& tp : compiled.targets)
    for (const auto& a : tp.artifacts) {
      if (failed_outputs.count(a.fatbin)) continue;
      fs::path fatbin = fs::path(out_dir_) / a.fatbin;
      try {
        std::string bytes = io::read_whole_file(fatbin);
        check_compile_result(bytes, fatbin.string(), a.uri, a.target, reg_.find(a.uri)->entries);
        results.push_back({&a, std::move(bytes)});
      } catch (const Error&) {
        continue;  // not there, or not what was asked for: run_build reports it
      }
    }
  in_parallel(results.size(), kCacheThreads,
              [&](std::size_t i) { store(*results[i].artifact, results[i].bytes); });
  for (const auto& r : results) write_record(*r.artifact, io::sha256_hex(r.bytes));
}

}  // namespace kiln::builder
