#pragma once
// `kiln build`: plan (registry x targets -> artifacts), build.ninja generation, running
// ninja with progress, and publishing one archive per target plus the release index.
// The planning half is pure (values in, values out) and unit-tested; run_build does the I/O.
// User documentation: docs/packager.md.
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "builder/toolkit.hpp"
#include "format/manifest.hpp"
#include "format/target.hpp"
#include "project/package.hpp"
#include "project/registry.hpp"
#include "util/progress.hpp"

namespace kiln::builder {

// One artifact: one specialisation built for one target. Paths are relative to the out
// directory, where ninja runs, so nothing in them depends on where the out directory is.
//
// Two ways to compile one (docs/decisions.md, "One front-end pass per family and target"):
// - per specialisation: one nvcc from its own stub to its fatbin (`pass` empty, `args` the nvcc
//   argv);
// - grouped (the default): a front-end pass (PlannedPass) compiles the stub of a bounded group
//   of its family's specialisations to one PTX module; then this artifact's back end (`args`,
//   run by `kiln build-entry`, entry_step.hpp) picks its entries out of that module and makes
//   its own fatbin: `ptxas -e <its entries>` for a SASS target, the entries' PTX cut out of the
//   module for a PTX target. The fatbin holds this URI's code only, as a per-spec one does.
struct PlannedArtifact {
  std::string uri;
  std::string family;
  format::Target target;
  std::string stub;               // stubs/<uri>.kiln-stub.cu, or the pass's group stub
  std::string fatbin;             // obj/<target>/<uri>.fatbin
  std::string depfile;            // obj/<target>/<uri>.d (per specialisation only)
  std::vector<std::string> args;  // nvcc argv after the compiler path, as ninja runs it; for a
                                  // grouped artifact, `kiln build-entry`'s argv after its name
  std::string pass;               // grouped: the pass's PTX (PlannedPass::ptx); "": per spec
  std::vector<std::string> pass_args;  // grouped: the pass's nvcc argv (PlannedPass::args)
};

// One front-end pass: the group stub of up to kMaxPassEntries entries of one family (its
// specialisations in URI order, cut into groups the same way whatever --only, --shard or the
// cache leave to compile, so a URI's bytes never depend on them) compiled to PTX for one
// target's virtual arch.
struct PlannedPass {
  std::string family;
  format::Target target;
  int group = 0;                  // the group's number within its family (0-based)
  std::string stub;               // stubs/<family>.<group>.kiln-group.cu
  std::string ptx;                // obj/passes/<virtual arch>/<family>.<group>.ptx: one pass
  std::string depfile;            // serves every target of its virtual arch (sm_80, compute_80)
  std::vector<std::string> args;  // nvcc argv after the compiler path
  std::vector<std::string> uris;  // every URI of the group, in URI order (planned or not)
};

struct TargetPlan {
  format::Target target;
  std::vector<PlannedArtifact> artifacts;  // sorted by URI
  std::vector<format::SkippedFamily> skipped;      // sorted by family
  std::vector<PlannedPass> passes;         // the passes the artifacts need, by family and group
                                           // (a pass of two targets is listed in both)
};

struct BuildPlan {
  std::string source_dir;                    // absolute; kernels/ lives below it
  std::vector<TargetPlan> targets;           // in Target order (SASS first, then arch)
  std::map<std::string, std::string> stubs;  // stub path -> contents
  std::size_t artifact_count() const;
  std::size_t pass_count() const;  // distinct passes
};

// The bound of one front-end pass: at most this many entries (a specialisation's entries all
// go into its one group). A failing pass costs one group, never the family or the release, and
// one huge family is many passes that ninja runs in parallel.
constexpr std::size_t kMaxPassEntries = 64;

enum class CompileMode {
  Grouped,            // one front-end pass per group, a back end per URI (the default)
  PerSpecialisation,  // one nvcc per URI and target (--one-nvcc-per-specialisation)
};

// Which specialisations to build for which targets. `only` holds fnmatch globs matched
// against family names and URIs (empty: everything). A family whose target rules do not
// admit a target is skipped for it, with the reason. Throws Error{NotFound} for a glob that
// matches nothing, Error{Unsupported} for a glob whose families build on none of `targets`.
// `mode` says how each artifact compiles (PlannedArtifact).
BuildPlan plan_build(const project::Registry& reg, const std::vector<format::Target>& targets,
                     const std::vector<std::string>& only, const std::string& source_dir,
                     CompileMode mode = CompileMode::PerSpecialisation);

// The plan with the artifacts of the passes whose PTX is in `failed_passes` compiled one nvcc
// per specialisation instead (their own stubs added, those passes dropped): what a failed pass
// falls back to, so that the error names the URI and the source line.
BuildPlan ungroup(const BuildPlan& plan, const project::Registry& reg,
                  const std::set<std::string>& failed_passes);

// The generated translation unit: includes the family's sources and takes each entry's
// address, which makes nvcc instantiate exactly those kernels.
std::string stub_source(const project::Family& fam, const project::Specialisation& spec);
// A front-end pass's translation unit: the family's sources once, then every entry of every
// specialisation of the group, in order.
std::string group_stub_source(const project::Family& fam,
                              const std::vector<const project::Specialisation*>& specs);

// build.ninja for a plan. Deterministic: the same plan, nvcc and source dir give the same
// bytes (nothing run-dependent such as times, job counts or the out directory).
std::string ninja_file(const BuildPlan& plan, const std::string& nvcc,
                       const std::string& launcher = "", const std::string& kiln = "kiln");

// The flags recorded in the manifest: the argv as run, with the source directory written as
// "$KILN_SOURCE" and the dependency-file flags (-MD -MF, or a pass's -Xcompiler -MD,-MF,...; no
// effect on the bytes) left out. A
// grouped artifact's are its pass's nvcc argv, "&&", then its back end's (entry_step.hpp).
std::vector<std::string> manifest_flags(const PlannedArtifact& a, const std::string& source_dir);

// ci/targets.txt: comma- or newline-separated targets, '#' starts a comment. Throws
// Error{Usage} naming `origin` on a malformed or empty list.
std::vector<format::Target> parse_targets_file(std::string_view text, const std::string& origin);

// Parallelism. Each edge compiles one arch, so nvcc's -t (per-arch threads) buys nothing:
// parallelism is ninja jobs only. jobs = min(cores, mem_available / per_job), at least 1;
// `requested` (--jobs) wins.
// Measured peak RSS of one nvcc job on the largest kernel (hopper_wgmma, sm_90a): ~100 MB;
// 512 MiB leaves headroom for heavier templates (docs/packager.md).
constexpr std::uint64_t kPerJobMemoryBytes = std::uint64_t{512} << 20;
int choose_jobs(unsigned cores, std::optional<std::uint64_t> mem_available_bytes,
                std::uint64_t per_job_bytes, std::optional<int> requested);
// MemAvailable from /proc/meminfo text, in bytes.
std::optional<std::uint64_t> parse_mem_available(std::string_view meminfo);

// SOURCE_DATE_EPOCH: a non-negative integer; throws Error{Usage} otherwise.
std::int64_t parse_source_date_epoch(std::string_view value);

// The build time recorded in manifests and archive mtimes, reproducible by default:
// SOURCE_DATE_EPOCH when set (throws Error{Usage} when malformed); else the source tree's last
// commit time (`git log -1 --format=%ct` output, when git answered with a number); else
// kFixedBuildTime. Never the clock: two plain builds of one tree give the same bytes.
constexpr std::int64_t kFixedBuildTime = 315532800;  // 1980-01-01T00:00:00Z, zip's first date
struct BuildTime {
  std::int64_t seconds = 0;
  std::string origin;  // "SOURCE_DATE_EPOCH", "git commit time", "fixed (no git commit)"
};
BuildTime choose_build_time(const std::optional<std::string>& source_date_epoch,
                            const std::optional<std::string>& git_commit_time);

// ---- shards: a deterministic part of one build's work ----

// "--shard I/N", 1 <= I <= N. Throws Error{Usage} naming the text.
struct ShardSpec {
  int index = 1;  // 1-based
  int count = 1;
};
ShardSpec parse_shard_spec(std::string_view text);

// The partition: the plan's units of work in plan order (targets in Target order, URIs
// sorted; a unit is one artifact compiled per specialisation, or every planned artifact of one
// front-end pass, so that no pass runs in two shards) are dealt round-robin, unit u (0-based)
// to shard u % N + 1. Every piece of work lands in exactly one shard, and shards differ by at
// most one unit.
int shard_of(std::size_t position, int count);
// For each piece of work in plan_work order, the shard (1..count) that holds it.
std::vector<int> plan_work_shards(const BuildPlan& plan, int count);
// The plan with only the artifacts of `shard` (targets and their skipped lists kept whole).
BuildPlan shard_plan(const BuildPlan& plan, const ShardSpec& shard);
// "<target>/<uri>": one piece of work, as shard manifests name it.
std::string work_key(const std::string& target, const std::string& uri);
std::vector<std::string> plan_work(const BuildPlan& plan);

// Base nvcc flags of every edge (family flags, -gencode and paths follow them).
const std::vector<std::string>& base_nvcc_flags();

// One line of ninja output with NINJA_STATUS="[%f/%t] ": "[3/8] NVCC <uri> <target>".
struct NinjaStatusLine {
  int finished = 0;
  int total = 0;
  std::string uri;
  std::string target;
};
std::optional<NinjaStatusLine> parse_ninja_status(std::string_view line);

// Matches each registry entry expression to a mangled symbol found in the built image, by
// demangled name (whitespace-insensitive). Throws Error{Format} naming the URI, target, the
// entry that is missing and the symbols that were found.
std::vector<format::ArtifactEntry::Entry> match_entries(
    const std::vector<std::string>& expressions, const std::vector<std::string>& symbols,
    const std::function<std::string(const std::string&)>& demangle, const std::string& uri,
    const std::string& target);

// ---- the result cache's key (pure; docs/decisions.md, "The build result cache") ----

// What a compile depends on that the plan does not say: the toolchain as nvcc will run it.
struct CompilerIdentity {
  std::string nvcc_version;      // ToolkitInfo::full_version, e.g. "13.0.88"
  std::string host_compiler;     // first line of `<host compiler> --version` (nvcc preprocesses
                                 // with it), or why it could not be run
  std::string nvcc_environment;  // NVCC_CCBIN, NVCC_PREPEND_FLAGS, NVCC_APPEND_FLAGS as set
};

// One compile's key: SHA-256 over tagged fields (Sha256::field), and the fields themselves, in
// the order hashed, for the record beside each fatbin (a person can diff two keys).
struct CompileKey {
  std::string hex;
  std::vector<std::pair<std::string, std::string>> fields;
};
constexpr const char* kCompileKeyVersion = "1";  // bump when the fields below change
// The version of a grouped artifact's back end (entry_step.hpp): bump when what it makes of a
// pass's module changes (the entries it picks, the PTX it cuts, the nvcc flags it adds).
constexpr const char* kEntryStepVersion = "1";

// The key of artifact `a` (of specialisation `spec`, compiled from stub text `stub`): the key's
// version, the specialisation's source hash (its family's sources, the kernels/ headers they
// include, its declaration), URI, parameters and entries, the stub (for a grouped artifact, its
// group's stub, which names every member of the group: a member added or removed changes the
// module and so the bytes), the target, kiln's back-end version (grouped), the flags as
// the manifest records them (source directory written $KILN_SOURCE, paths relative to the out
// directory), and the compiler identity. No absolute path, unless a flag makes nvcc embed paths
// in the output (embeds_paths): then the source and out directories are in it too.
CompileKey compile_key(const PlannedArtifact& a, const project::Specialisation& spec,
                       const std::string& stub, const std::string& source_dir,
                       const std::string& out_dir, const CompilerIdentity& compiler);
// -lineinfo, -G, -g and their long forms: the output then holds paths (cuda-facts: -lineinfo
// embeds the working directory, -G temp names), so trees at different paths must not share it.
bool embeds_paths(const std::vector<std::string>& flags);

// ---- the build itself (I/O) ----

// How progress is shown: the one progress writer's styles (util/progress.hpp).
using ProgressStyle = util::ProgressStyle;

struct BuildOptions {
  std::vector<format::Target> targets;
  // The targets the build was asked for, before a toolkit left out those it does not build: the
  // index's provenance lists these, so every toolkit of one build records the same list. Empty:
  // `targets`.
  std::vector<format::Target> asked_targets;
  std::vector<std::string> only;
  std::optional<int> jobs;
  std::string out_dir;
  std::string dist_dir;
  std::string source_dir;
  std::int64_t build_time = 0;  // manifest build time and archive mtimes (choose_build_time)
  std::string build_time_origin = "fixed (no git commit)";  // BuildTime::origin, for the index
  ProgressStyle progress = ProgressStyle::Lines;
  // Compiler launcher (e.g. sccache): runs as `<launcher> <nvcc> <args>`. Part of nothing
  // hashed or recorded (manifest flags, shard toolchain): it must not change the bytes, and
  // every result is checked before packing. Empty: nvcc runs directly.
  std::string launcher;
  // Grouped (the default) or one nvcc per specialisation (the reference and the fallback).
  CompileMode mode = CompileMode::Grouped;
  // The kiln executable build.ninja runs for a grouped artifact's back end; "": this process's
  // own (/proc/self/exe).
  std::string kiln_executable;
  // Build only this shard's part; `dist_dir` then receives a shard (shard.hpp), not archives.
  std::optional<ShardSpec> shard;
  // The result cache (--cache, KILN_BUILD_CACHE): a directory or an http(s):// URL; empty: none.
  // Consulted before ninja runs; a hit skips the compile, a miss is stored after its check.
  std::string cache;
  long cache_connect_timeout_ms = 2000;  // a remote cache's bounds (result_cache.hpp)
  long cache_request_deadline_ms = 10000;
  std::string cache_ca_bundle;  // PEM file for an https:// cache (KILN_CA_BUNDLE); empty: system
  // NVCC_CCBIN, NVCC_PREPEND_FLAGS, NVCC_APPEND_FLAGS: in the key (nvcc reads them).
  std::string nvcc_ccbin, nvcc_prepend_flags, nvcc_append_flags;
};

// What the result cache did in one build.
struct CacheStats {
  std::string location;        // the directory or URL (no credentials)
  std::size_t hits = 0;        // results taken from the cache (checked like a compile)
  std::size_t misses = 0;      // compiled (nothing usable in the cache), refused ones included
  std::size_t refused = 0;     // entries refused: malformed, digest or compile-result check
  std::size_t up_to_date = 0;  // already in --out with the same key: neither looked up nor built
  std::size_t stored = 0;      // compile results stored
  std::uint64_t bytes_fetched = 0;
  std::uint64_t bytes_stored = 0;
  std::string skipped;  // why the cache was dropped for the rest of the build; empty: it was not
};

struct PublishedArchive {
  std::string path;
  format::Target target;
  std::uint64_t size = 0;
  std::string sha256;
  std::size_t artifacts = 0;
  std::vector<format::SkippedFamily> skipped;
};

struct BuildResult {
  std::size_t total = 0;     // artifacts in the plan (in this shard's part, for a shard)
  std::size_t compiled = 0;  // artifacts compiled this time (ninja's per-URI edges that ran)
  std::size_t passes = 0;    // front-end passes run this time
  std::size_t fallbacks = 0; // artifacts compiled one by one after their pass failed
  std::string mode;          // "grouped" or "per-specialisation"
  int jobs = 0;
  double seconds = 0;
  std::string index_path;  // for a shard: its shard.json
  std::vector<PublishedArchive> archives;
  std::optional<CacheStats> cache;  // when a result cache was given
  // Archives of other toolkits that the index in dist listed and this publish left out, a line
  // each (publish_release).
  std::vector<std::string> dropped;
};

// What identifies a release's archives: the project's package name and version (its
// registry/package.json and VERSION), its git commit, and the CUDA toolkit; and the package's
// description (project/package_description.hpp), published beside the index and pinned by it.
struct PackageIdentity {
  std::string name;  // "kiln-kernels"
  std::string version;
  std::string git_commit;
  std::string cuda_version;
  std::string description_json;  // "": the release carries no description
  // How the release is built, written into its index. package_identity fills what the tree and
  // host say (source commit and dirtiness, kiln's version, the host); the build adds the
  // toolkit, build time and targets (build_provenance).
  format::Provenance provenance;
};
// The project's git commit: kiln's own compiled-in one for kiln's tree, else `git rev-parse HEAD`
// in the project, else "" (not a git checkout). Its provenance's source is `git rev-parse HEAD`
// and whether `git status` lists a tracked file as changed (untracked files are left out: a
// build's own outputs must not make the next build's index differ).
PackageIdentity package_identity(const project::Project& project);
// "x86_64-linux": the machine and system `uname` reports, lowercase.
std::string host_name();
// `id.provenance` completed with the toolkit that compiles, the build time and its origin
// (choose_build_time) and the targets asked for.
format::Provenance build_provenance(const PackageIdentity& id, const std::string& nvcc_full_version,
                                    std::int64_t build_time, const std::string& build_time_origin,
                                    const std::vector<format::Target>& targets);

// One archive's content: its manifest (every field set, artifacts sorted by URI) and the bytes
// of each artifact, in the manifest's order.
struct ArchiveContent {
  format::Manifest manifest;
  std::vector<std::string> bytes;
};
// One compile result as packing takes it: its image's bytes and the entries found in it.
struct CompiledArtifact {
  std::string bytes;
  std::vector<format::ArtifactEntry::Entry> entries;
};
// The content of one target's archive: each planned artifact's manifest entry (the registry's
// values, the flags it was compiled with, the size and digest of its result) and bytes, as
// `result` gives them (run_build: the file nvcc wrote, held to check_compile_result). One pass,
// each URI's specialisation found by binary search: linear in the artifacts.
ArchiveContent archive_content(
    const TargetPlan& tp, const project::Registry& reg, const PackageIdentity& id, std::int64_t build_time,
    const std::string& source_dir,
    const std::function<CompiledArtifact(const PlannedArtifact&, const project::Specialisation&)>& result);
// Writes one archive per content, the description (when the identity has one) and the index
// into dist, atomically as a set (temporary names renamed only after all are written; an
// archive whose members are unchanged is not rewritten; the index last). `kiln build` and `kiln
// merge` both publish through this, so their bytes agree.
// `content(i)` gives archive i's content (i < archives), asked once each and in order, so that
// one archive's artifact bytes are in memory at a time, not the release's.
// The archives are those of one toolkit (`id.cuda_version`); the index keeps listing the other
// toolkits' archives of the same build that the index in dist lists (toolkit_merge.hpp:
// kept_toolkits), and `dropped` (when given) receives a line for each one left out.
std::vector<PublishedArchive> publish_release(
    const PackageIdentity& id, std::size_t archives,
    const std::function<ArchiveContent(std::size_t)>& content, std::int64_t build_time,
    const std::string& dist_dir, std::string* index_path,
    std::vector<std::string>* dropped = nullptr);

// Checks one compile result before it is packed: exactly one image, of the artifact's target
// (arch and SASS/PTX), holding every registry entry. Returns the manifest entries. Throws
// Error{Format} naming the artifact (URI, target) and the file.
std::vector<format::ArtifactEntry::Entry> check_compile_result(const std::string& bytes,
                                                       const std::string& path,
                                                       const std::string& uri, const format::Target& t,
                                                       const std::vector<std::string>& entries);

// Plans, writes stubs and build.ninja (each only when its content changes), runs ninja and,
// when every compile succeeded, publishes archives and the index into dist. Progress goes to
// `progress_out` (stderr in the CLI). Throws Error{Compile} naming family, URI, target and
// the compiler's message; nothing is published then and the previous dist is left as it was.
BuildResult run_build(const BuildOptions& opts, Toolkit& toolkit, std::FILE* progress_out);

std::string build_result_json(const BuildResult& r);

}  // namespace kiln::builder
