// `kiln build`'s I/O half: plan, write stubs and build.ninja, compile through a CommandRunner,
// check every result, publish archives and the index (or a shard). build.hpp has the contract.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "builder/cached_compiles.hpp"
#include "builder/command_runner.hpp"
#include "builder/nvrtc_backend.hpp"
#include "builder/nvrtc_toolkit.hpp"
#include "builder/shard.hpp"
#include "io/atomic_file.hpp"
#include "io/file_lock.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "kiln/version.hpp"
#include "runtime/environment.hpp"
#include "util/progress.hpp"

namespace kiln::builder {
namespace fs = std::filesystem;

namespace {

// Rewrites a file only when its bytes change, so ninja sees no new mtime on a no-op build.
bool write_if_changed(const fs::path& p, const std::string& data) {
  std::error_code ec;
  if (fs::exists(p, ec)) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in && ss.str() == data) return false;
  }
  fs::create_directories(p.parent_path(), ec);
  if (ec)
    throw Error(ErrorKind::Io,
                "cannot create directory " + p.parent_path().string() + ": " + ec.message());
  // Its writers hold the build files' lock (run_build): what a killed one left goes first.
  io::remove_orphaned_temps(p.parent_path(), p.filename().string());
  io::write_file_atomically(p, data);
  return true;
}

}  // namespace

ArchiveContent archive_content(
    const TargetPlan& tp, const project::Registry& reg, const PackageIdentity& id, std::int64_t build_time,
    const std::string& source_dir,
    const std::function<CompiledArtifact(const PlannedArtifact&, const project::Specialisation&)>& result) {
  ArchiveContent c;
  format::Manifest& m = c.manifest;
  m.package = id.name;
  m.package_version = id.version;
  m.git_commit = id.git_commit;
  m.cuda_version = id.cuda_version;
  m.target = tp.target.str();
  m.build_time = build_time;
  m.skipped = tp.skipped;
  m.artifacts.reserve(tp.artifacts.size());
  c.bytes.reserve(tp.artifacts.size());
  for (const auto& a : tp.artifacts) {
    const project::Specialisation* spec = reg.find(a.uri);
    if (!spec) throw Error(ErrorKind::Internal, "planned URI " + a.uri + " is not in the registry");
    CompiledArtifact compiled = result(a, *spec);
    format::ArtifactEntry e;
    e.uri = a.uri;
    e.family = a.family;
    e.params = spec->params;
    e.entries = std::move(compiled.entries);
    e.source_hash = spec->source_hash;
    e.flags = manifest_flags(a, source_dir);
    e.file = a.uri + ".fatbin";
    e.size = compiled.bytes.size();
    e.sha256 = io::sha256_hex(compiled.bytes);
    m.artifacts.push_back(std::move(e));
    c.bytes.push_back(std::move(compiled.bytes));
  }
  return c;
}

BuildResult run_build(const BuildOptions& opts, Toolkit& toolkit, CommandRunner& runner,
                      std::FILE* progress_out) {
  auto t0 = std::chrono::steady_clock::now();
  std::string source_dir = fs::weakly_canonical(fs::absolute(opts.source_dir)).string();
  fs::path out_dir = fs::absolute(opts.out_dir).lexically_normal();
  fs::path dist_dir = fs::absolute(opts.dist_dir).lexically_normal();

  project::Project project = project::load_project(source_dir);
  const project::Registry& reg = project.registry;

  // Every capability is checked before the first compile.
  // The toolkit's own CUDA version is what the manifests and archive names carry.
  const ToolkitInfo& tk = toolkit.info();
  const bool nvrtc = tk.kind == ToolkitInfo::Kind::Nvrtc;
  check_targets(tk, opts.targets);
  BuildPlan full_plan = plan_build(reg, opts.targets, opts.only, source_dir, opts.mode);
  BuildPlan plan = opts.shard ? shard_plan(full_plan, *opts.shard) : full_plan;
  // With NVRTC the same plan, its compiles spelled for NVRTC and ptxas (nvrtc_backend.hpp).
  if (nvrtc) plan = nvrtc_plan(plan, reg);
  runner.check_available();
  const std::string path_env = runtime::read_environment().path;
  std::string launcher;
  if (!opts.launcher.empty()) {
    auto found = opts.launcher.find('/') != std::string::npos
                     ? std::optional<std::string>(opts.launcher)
                     : find_on_path(opts.launcher, path_env);
    if (!found || ::access(found->c_str(), X_OK) != 0)
      throw Error(
          ErrorKind::Unsupported,
          "compiler launcher '" + opts.launcher +
              "' (--launcher or KILN_COMPILER_LAUNCHER) is not an executable file" +
              (opts.launcher.find('/') != std::string::npos ? std::string()
                                                            : " on PATH (" + path_env + ")"));
    launcher = fs::absolute(*found).string();
  }

  // One writer of --out's build files (stubs, build.ninja) at a time: a flock on --out.
  std::optional<io::FileLock> build_files_lock;
  {
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    if (ec) throw Error(ErrorKind::Io, "cannot create " + out_dir.string() + ": " + ec.message());
    build_files_lock = io::FileLock::acquire_directory(out_dir, std::chrono::minutes(10));
  }

  // The kiln that build.ninja runs for grouped back ends: this one, by default.
  std::string kiln = opts.kiln_executable;
  if (kiln.empty() && plan.pass_count() > 0 && !nvrtc) {
    std::error_code ec;
    kiln = fs::read_symlink("/proc/self/exe", ec).string();
    if (ec || kiln.empty())
      throw Error(ErrorKind::Unsupported,
                  "cannot find this kiln executable (/proc/self/exe: " + ec.message() +
                      "), which build.ninja runs for each specialisation's back end; "
                      "--one-nvcc-per-specialisation builds without it");
  }

  for (const auto& [rel, text] : plan.stubs) write_if_changed(out_dir / rel, text);
  for (const auto& tp : plan.targets) {
    std::error_code ec;
    fs::create_directories(out_dir / "obj" / tp.target.str(), ec);
    for (const auto& p : tp.passes)
      if (!ec) fs::create_directories((out_dir / p.ptx).parent_path(), ec);
    if (ec)
      throw Error(ErrorKind::Io, "cannot create " + (out_dir / "obj" / tp.target.str()).string() +
                                     ": " + ec.message());
  }
  BuildResult result;
  result.mode = opts.mode == CompileMode::Grouped ? "grouped" : "per-specialisation";
  // With a result cache, hits and results already in --out never become ninja edges.
  // NVRTC has no ninja to skip what is up to date: without --cache its results are kept in a
  // result cache inside --out (<out>/nvrtc-results), so a rebuild compiles only what changed.
  BuildOptions cache_opts = opts;
  if (nvrtc && cache_opts.cache.empty()) cache_opts.cache = (out_dir / "nvrtc-results").string();
  std::unique_ptr<CachedCompiles> cached;
  if (!cache_opts.cache.empty())
    cached = CachedCompiles::open(cache_opts, reg, plan, out_dir.string(), tk, path_env,
                                  progress_out, result.cache);
  BuildPlan to_compile = cached ? cached->consult() : plan;
  // NVRTC compiles in this process: no build.ninja.
  if (!nvrtc)
    write_if_changed(out_dir / "build.ninja", ninja_file(to_compile, tk.nvcc, launcher, kiln));
  build_files_lock.reset();

  std::optional<std::uint64_t> mem;
  {
    std::ifstream mi("/proc/meminfo");
    std::ostringstream ss;
    ss << mi.rdbuf();
    mem = parse_mem_available(ss.str());
  }
  result.total = plan.artifact_count();
  result.jobs =
      choose_jobs(std::thread::hardware_concurrency(), mem, kPerJobMemoryBytes, opts.jobs);

  // Ninja's per-edge lines: rewritten in place on a terminal, plain lines otherwise.
  util::ProgressLine progress(progress_out, opts.progress);
  CompileOutcome nr;
  auto compile = [&](const BuildPlan& p) {
    CompileOutcome o =
        runner.run(p, out_dir.string(), result.jobs, [&](const NinjaStatusLine& s) {
          ++result.compiled;
          char text[512], elapsed[32];
          std::snprintf(text, sizeof text, "[%d/%d] %s %s %s", s.finished, s.total,
                        nvrtc ? "NVRTC" : "NVCC", s.uri.c_str(), s.target.c_str());
          std::snprintf(
              elapsed, sizeof elapsed, "  %.1fs",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
          progress.step(text, elapsed);
        });
    result.passes += o.passes_run;
    return o;
  };
  if (!cached || to_compile.artifact_count() > 0) nr = compile(to_compile);
  progress.finish();

  // A failed front-end pass: its specialisations are compiled one nvcc each, so that a broken
  // one is named with its source line and the others still build (ninja ran nothing behind the
  // pass). Their results are not stored in the result cache: their keys are the group's.
  std::set<std::string> fallback_outputs;
  for (;;) {
    std::set<std::string> failed_passes;
    for (const auto& f : nr.failures)
      for (const auto& tp : to_compile.targets)
        for (const auto& p : tp.passes)
          if (p.ptx == f.output) failed_passes.insert(p.ptx);
    if (failed_passes.empty()) break;
    for (const auto& ptx : failed_passes) {
      std::size_t n = 0;
      const PlannedPass* pass = nullptr;
      std::string targets;
      for (const auto& tp : to_compile.targets) {
        for (const auto& p : tp.passes)
          if (p.ptx == ptx) {
            pass = &p;
            targets += (targets.empty() ? "" : ", ") + tp.target.str();
          }
        for (const auto& a : tp.artifacts)
          if (a.pass == ptx) {
            ++n;
            fallback_outputs.insert(a.fatbin);
          }
      }
      if (pass)
        progress.line("front-end pass " + pass->family + "." + std::to_string(pass->group) +
                      " for " + targets + " failed; compiling its " + std::to_string(n) +
                      " specialisations one nvcc each");
    }
    to_compile = ungroup(to_compile, reg, failed_passes);
    plan = ungroup(plan, reg, failed_passes);
    if (nvrtc) {
      to_compile = nvrtc_plan(to_compile, reg);
      plan = nvrtc_plan(plan, reg);
    }
    {
      // The build files again, under the same lock as the first writing.
      io::FileLock relock = io::FileLock::acquire_directory(out_dir, std::chrono::minutes(10));
      for (const auto& [rel, text] : to_compile.stubs) write_if_changed(out_dir / rel, text);
      if (!nvrtc)
        write_if_changed(out_dir / "build.ninja", ninja_file(to_compile, tk.nvcc, launcher, kiln));
    }
    nr = compile(to_compile);
    progress.finish();
  }
  result.fallbacks = fallback_outputs.size();
  if (cached) {
    // Also after a failed build: what did compile is stored, so the next build redoes only
    // the failures.
    std::set<std::string> failed = fallback_outputs;
    for (const auto& f : nr.failures) failed.insert(f.output);
    cached->keep_compiled(to_compile, failed);
    result.cache = cached->stats();
  }
  if (nr.exit_code != 0) {
    const auto& failures = nr.failures;
    if (failures.empty())
      throw Error(ErrorKind::Internal, "ninja failed (exit code " + std::to_string(nr.exit_code) +
                                           ") in " + out_dir.string() + ":\n" + nr.log);
    std::string msg = "compile failed; nothing was published to " + dist_dir.string();
    for (const auto& f : failures) {
      const PlannedArtifact* a = nullptr;
      for (const auto& tp : plan.targets)
        for (const auto& x : tp.artifacts)
          if (x.fatbin == f.output) a = &x;
      if (a)
        msg += "\n" + tk.compiler_name() + " failed for family " + a->family + ", URI " + a->uri + ", target " +
               a->target.str() + ":\n" + f.message;
      else
        msg += "\n" + f.output + " failed:\n" + f.message;
    }
    throw Error(ErrorKind::Compile, msg);
  }

  // Every result is checked before anything is packed: a corrupt result (a bad cache entry
  // from the launcher, a truncated file) fails the build naming the artifact, and is removed
  // so that the next build compiles it again.
  PackageIdentity id = package_identity(project);
  id.cuda_version = tk.version;
  id.provenance = build_provenance(id, tk.full_version, opts.build_time, opts.build_time_origin,
                                   opts.asked_targets.empty() ? opts.targets : opts.asked_targets);
  if (nvrtc) id.provenance.toolkits = {{"nvrtc", tk.full_version}, {"ptxas", tk.ptxas_version}};
  // One target's results at a time: read, checked and packed, so that a build holds one
  // archive's artifacts in memory, not the release's. A bad result still fails the build before
  // anything is published (publish_release renames nothing until every archive is written).
  auto content = [&](std::size_t t) {
    const TargetPlan& tp = plan.targets.at(t);
    return archive_content(tp, reg, id, opts.build_time, source_dir,
                           [&](const PlannedArtifact& a, const project::Specialisation& spec) {
                             fs::path fb = out_dir / a.fatbin;
                             CompiledArtifact c{io::read_whole_file(fb), {}};
                             try {
                               c.entries = check_compile_result(c.bytes, fb.string(), a.uri,
                                                                tp.target, spec.entries);
                             } catch (const Error&) {
                               std::error_code ec;
                               fs::remove(fb, ec);
                               fs::remove(compile_record_path(out_dir.string(), a), ec);
                               throw;
                             }
                             return c;
                           });
  };
  if (opts.shard) {
    std::vector<ArchiveContent> contents;
    for (std::size_t t = 0; t < plan.targets.size(); ++t) contents.push_back(content(t));
    ShardManifest sm;
    sm.package = id.name;
    sm.package_version = id.version;
    sm.git_commit = id.git_commit;
    sm.cuda_version = id.cuda_version;
    sm.registry_sha256 = io::sha256_file(fs::path(source_dir) / "registry" / "kernels.json");
    sm.nvcc_version = tk.full_version;
    sm.base_flags = base_nvcc_flags();
    sm.build_time = opts.build_time;
    sm.provenance = id.provenance;
    sm.shard = *opts.shard;
    sm.work = plan_work(full_plan);
    sm.work_shards = plan_work_shards(full_plan, opts.shard->count);
    result.index_path = write_shard(dist_dir.string(), sm, contents, id.description_json);
  } else {
    result.archives = publish_release(id, plan.targets.size(), content, opts.build_time,
                                      dist_dir.string(), &result.index_path, &result.dropped);
    for (const auto& line : result.dropped) std::fprintf(progress_out, "%s\n", line.c_str());
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

BuildResult run_build(const BuildOptions& opts, Toolkit& toolkit, std::FILE* progress_out) {
  if (auto* nvrtc = dynamic_cast<NvrtcToolkit*>(&toolkit)) {
    auto runner = make_nvrtc_runner(*nvrtc);
    return run_build(opts, toolkit, *runner, progress_out);
  }
  auto ninja = make_ninja_runner(runtime::read_environment().path);
  return run_build(opts, toolkit, *ninja, progress_out);
}

std::string build_result_json(const BuildResult& r) {
  nlohmann::ordered_json j;
  j["compiled"] = r.compiled;
  j["total"] = r.total;
  // How it compiled: front-end passes run, and the specialisations (artifacts) they served.
  j["mode"] = r.mode;
  j["passes"] = r.passes;
  j["specialisations"] = {{"total", r.total}, {"compiled", r.compiled}, {"fallbacks", r.fallbacks}};
  j["jobs"] = r.jobs;
  j["seconds"] = std::round(r.seconds * 1000) / 1000;
  j["index"] = r.index_path;
  nlohmann::ordered_json arcs = nlohmann::ordered_json::array();
  for (const auto& a : r.archives) {
    nlohmann::ordered_json o;
    o["path"] = a.path;
    o["target"] = a.target.str();
    o["size"] = a.size;
    o["sha256"] = a.sha256;
    o["artifacts"] = a.artifacts;
    nlohmann::ordered_json sk = nlohmann::ordered_json::array();
    for (const auto& s : a.skipped) sk.push_back({{"family", s.family}, {"reason", s.reason}});
    o["skipped"] = std::move(sk);
    arcs.push_back(std::move(o));
  }
  j["archives"] = std::move(arcs);
  j["cache"] = nullptr;
  if (r.cache) {
    const CacheStats& c = *r.cache;
    j["cache"] = {{"location", c.location},
                  {"hits", c.hits},
                  {"misses", c.misses},
                  {"refused", c.refused},
                  {"up_to_date", c.up_to_date},
                  {"stored", c.stored},
                  {"bytes_fetched", c.bytes_fetched},
                  {"bytes_stored", c.bytes_stored},
                  {"skipped", c.skipped.empty() ? nlohmann::ordered_json()
                                                : nlohmann::ordered_json(c.skipped)}};
  }
  return j.dump(2) + "\n";
}

}  // namespace kiln::builder
