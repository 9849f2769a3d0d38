#pragma once
// `kiln build --cache`: the result cache in front of ninja. Before build.ninja is written, every
// artifact of the plan is either up to date in --out (its record says the same key and the
// fatbin's digest), a hit (fetched, its digest and the compile-result check passed, written into
// --out), or left to compile; only those become ninja edges. After the compiles, each result
// that passed the same check is stored and recorded. The cache never fails the build: a cache
// that errs is dropped for the rest of it, with one line saying why (docs/packager.md, "Result
// cache"; the choice against a per-edge wrapper is in docs/decisions.md).
//
// The record beside each fatbin, <fatbin>.key, text:
//   kiln compile key 1
//   key <64 hex>
//   sha256 <64 hex: the fatbin's>
//   <tag>: <value>        every field of the key, in the order hashed (newlines as \n)
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "builder/build.hpp"
#include "result_cache/result_cache.hpp"

namespace kiln::builder {

class CachedCompiles {
 public:
  // Opens opts.cache (result_cache.hpp: open_result_cache) and computes every artifact's key.
  // A cache that cannot be opened (a directory that cannot be created) is skipped: nullptr,
  // `stats` says why, and one line on `log` does. Throws Error{Usage} for a malformed --cache.
  static std::unique_ptr<CachedCompiles> open(const BuildOptions& opts, const project::Registry& reg,
                                              const BuildPlan& plan, const std::string& out_dir,
                                              const ToolkitInfo& toolkit,
                                              const std::string& path_env, std::FILE* log,
                                              std::optional<CacheStats>& stats);

  // Looks up what is not up to date in --out, writes the checked hits there, and returns the
  // plan of what is left to compile. Throws Error{Io} when --out cannot be written.
  BuildPlan consult();
  // After the compiles of `compiled`: checks each result not in `failed_outputs` (fatbin paths
  // relative to --out), stores those that pass and records their keys. A result that fails the
  // check is left for run_build to report.
  void keep_compiled(const BuildPlan& compiled, const std::set<std::string>& failed_outputs);

  const CacheStats& stats() const { return stats_; }

  CachedCompiles(std::unique_ptr<result_cache::ResultCache> cache, const project::Registry& reg, const BuildPlan& plan,
                 std::string out_dir, const CompilerIdentity& compiler, std::FILE* log);

 private:
  enum class Found { Hit, Miss };
  bool up_to_date(const PlannedArtifact& a) const;
  Found look_up(const PlannedArtifact& a);
  void store(const PlannedArtifact& a, const std::string& bytes);
  void write_record(const PlannedArtifact& a, const std::string& sha256) const;
  void drop(const std::string& reason);
  bool dropped();
  void say(const std::string& line);

  std::unique_ptr<result_cache::ResultCache> cache_;
  const project::Registry& reg_;
  const BuildPlan& plan_;
  std::string out_dir_;
  std::map<std::string, CompileKey> keys_;  // by fatbin path (relative to --out)
  std::FILE* log_;
  std::mutex mutex_;  // guards stats_, stores_dropped_ and log_ across lookup and store threads
  CacheStats stats_;
  bool stores_dropped_ = false;
};

// <out_dir>/<fatbin>.key
std::string compile_record_path(const std::string& out_dir, const PlannedArtifact& a);

// The record's text (the grammar above); pure.
std::string compile_record(const CompileKey& key, const std::string& fatbin_sha256);

}  // namespace kiln::builder
