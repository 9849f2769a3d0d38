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
#include <string>
#include <string_view>
#include <vector>

#include "kiln/manifest.hpp"
#include "kiln/registry.hpp"
#include "kiln/target.hpp"
#include "toolkit.hpp"

namespace kiln::packager {

// One artifact: one specialisation built for one target. Paths are relative to the out
// directory, where ninja runs, so nothing in them depends on where the out directory is.
struct PlannedArtifact {
  std::string uri;
  std::string family;
  Target target;
  std::string stub;               // stubs/<uri>.kiln-stub.cu
  std::string fatbin;             // obj/<target>/<uri>.fatbin
  std::string depfile;            // obj/<target>/<uri>.d
  std::vector<std::string> args;  // nvcc argv after the compiler path, as ninja runs it
};

struct TargetPlan {
  Target target;
  std::vector<PlannedArtifact> artifacts;  // sorted by URI
  std::vector<SkippedFamily> skipped;      // sorted by family
};

struct BuildPlan {
  std::string source_dir;                    // absolute; kernels/ lives below it
  std::vector<TargetPlan> targets;           // in Target order (SASS first, then arch)
  std::map<std::string, std::string> stubs;  // stub path -> contents
  std::size_t artifact_count() const;
};

// Which specialisations to build for which targets. `only` holds fnmatch globs matched
// against family names and URIs (empty: everything). A family whose target rules do not
// admit a target is skipped for it, with the reason. Throws Error{NotFound} for a glob that
// matches nothing, Error{Unsupported} for a glob whose families build on none of `targets`.
BuildPlan plan_build(const Registry& reg, const std::vector<Target>& targets,
                     const std::vector<std::string>& only, const std::string& source_dir);

// The generated translation unit: includes the family's sources and takes each entry's
// address, which makes nvcc instantiate exactly those kernels.
std::string stub_source(const Family& fam, const Specialisation& spec);

// build.ninja for a plan. Deterministic: the same plan, nvcc and source dir give the same
// bytes (nothing run-dependent such as times, job counts or the out directory).
std::string ninja_file(const BuildPlan& plan, const std::string& nvcc);

// The flags recorded in the manifest: the argv as run, with the source directory written as
// "$KILN_SOURCE" and the dependency-file flags (-MD -MF, no effect on the bytes) left out.
std::vector<std::string> manifest_flags(const PlannedArtifact& a, const std::string& source_dir);

// ci/targets.txt: comma- or newline-separated targets, '#' starts a comment. Throws
// Error{Usage} naming `origin` on a malformed or empty list.
std::vector<Target> parse_targets_file(std::string_view text, const std::string& origin);

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
std::vector<ArtifactEntry::Entry> match_entries(
    const std::vector<std::string>& expressions, const std::vector<std::string>& symbols,
    const std::function<std::string(const std::string&)>& demangle, const std::string& uri,
    const std::string& target);

// ---- the build itself (I/O) ----

enum class ProgressStyle { Live, Lines };

struct BuildOptions {
  std::vector<Target> targets;
  std::vector<std::string> only;
  std::optional<int> jobs;
  std::string out_dir;
  std::string dist_dir;
  std::string source_dir;
  std::int64_t build_time = 0;  // manifest build time and archive mtimes (SOURCE_DATE_EPOCH or now)
  ProgressStyle progress = ProgressStyle::Lines;
};

struct PublishedArchive {
  std::string path;
  Target target;
  std::uint64_t size = 0;
  std::string sha256;
  std::size_t artifacts = 0;
  std::vector<SkippedFamily> skipped;
};

struct BuildResult {
  std::size_t total = 0;     // artifacts in the plan
  std::size_t compiled = 0;  // edges ninja ran this time
  int jobs = 0;
  double seconds = 0;
  std::string index_path;
  std::vector<PublishedArchive> archives;
};

// Plans, writes stubs and build.ninja (each only when its content changes), runs ninja and,
// when every compile succeeded, publishes archives and the index into dist. Progress goes to
// `progress_out` (stderr in the CLI). Throws Error{Compile} naming family, URI, target and
// the compiler's message; nothing is published then and the previous dist is left as it was.
BuildResult run_build(const BuildOptions& opts, Toolkit& toolkit, std::FILE* progress_out);

std::string build_result_json(const BuildResult& r);

}  // namespace kiln::packager
