#pragma once
// Shards (`kiln build --shard I/N`) and `kiln merge`. A shard is a directory:
//   shard.json                 what it is (below) and the manifest entries of what it holds
//   <target>/<uri>.fatbin      one checked compile result per piece of work it holds
// The shard manifest is self-describing: package, version, registry hash, toolchain identity
// (nvcc version, base flags; each result's full flags are in its entry), build time, the whole
// build's work list, and each result's digest. Merging checks all of it and publishes through
// publish_release, so shards merge into the bytes a one-machine `kiln build` gives.
// Format: docs/packager.md ("Sharded builds"). Planning the merge is pure; run_merge does I/O.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "builder/build.hpp"
#include "format/manifest.hpp"

namespace kiln::builder {

// 2: a "provenance" object (format::Provenance), which the merged index carries.
// 3: work_shards (which shard holds each piece: a front-end pass's pieces share one).
constexpr int kShardFormat = 3;
constexpr const char* kShardFileName = "shard.json";

struct ShardManifest {
  int format_version = kShardFormat;
  std::string package;  // "kiln-kernels"
  std::string package_version;
  std::string git_commit;
  std::string cuda_version;
  std::string registry_sha256;  // of registry/kernels.json
  std::string nvcc_version;     // full toolkit version of the nvcc that compiled
  std::vector<std::string> base_flags;
  std::int64_t build_time = 0;
  format::Provenance provenance;  // this shard's build: its host, its tree's state
  ShardSpec shard;
  std::vector<std::string> work;  // every "<target>/<uri>" of the whole build, in plan order
  std::vector<int> work_shards;   // the shard (1..N) that holds each piece of `work`, in order
                                  // (plan_work_shards: a front-end pass's pieces share one)
  // One per target of the build: this shard's artifacts (entry, flags, size, sha256), and the
  // target's skipped families. Fields other than artifacts repeat the shard's identity.
  std::vector<format::Manifest> targets;
};

std::string shard_to_json(const ShardManifest& m);
// Validates every field; throws Error{Format} naming origin and field.
ShardManifest parse_shard_manifest(std::string_view text, const std::string& origin);
// "<target>/<file>": where a result lives inside its shard directory.
std::string shard_member_path(const std::string& target, const std::string& file);

// ---- merge ----

struct ShardInput {
  std::string origin;  // the shard directory, for messages
  ShardManifest manifest;
};

struct MergePlan {
  PackageIdentity id;
  std::int64_t build_time = 0;
  std::vector<format::Manifest> manifests;                // complete, one per target
  std::vector<std::vector<std::size_t>> held_by;  // [target][artifact] -> index in shards
};

// Pure. Refuses, naming the field, both values and both shards: shards whose package,
// version, commit, CUDA version, registry, toolchain (nvcc version, base flags), build time,
// shard count or work list differ (Error{Stale}); two shards of one index or holding the same
// piece of work (Error{Format}); a piece of work no shard holds, or one outside the work list
// (Error{NotFound} / Error{Format}).
MergePlan plan_merge(const std::vector<ShardInput>& shards);

struct MergeResult {
  std::string index_path;
  std::vector<PublishedArchive> archives;
  std::vector<std::string> dropped;  // other toolkits' archives left out (publish_release)
  double seconds = 0;
};

// Reads each shard directory's shard.json, plans the merge, reads every result and checks its
// size and SHA-256 against the shard's entry (Error{Integrity} naming shard and file), takes
// the package description the shards carry (the same bytes in each, else Error{Stale} naming
// two shards), then publishes archives, description and index into dist.
MergeResult run_merge(const std::vector<std::string>& shard_dirs, const std::string& dist_dir);

// Writes a shard: results first, then the package's description (<name>-<version>.package.json,
// when `description_json` is not empty), shard.json last (atomically), so a directory with a
// shard.json holds a whole shard. Returns the shard.json path.
std::string write_shard(const std::string& dir, const ShardManifest& identity,
                        const std::vector<ArchiveContent>& contents,
                        const std::string& description_json);

}  // namespace kiln::builder
