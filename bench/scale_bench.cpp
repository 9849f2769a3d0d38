// kiln scaling benchmark (docs/performance.md, "Package size"): what kiln costs as a package
// grows from 10 to 20,000 specialisations. scripts/bench_scale.sh drives it; each mode is one
// process, so "get" measures what a fresh process of an application pays.
//
//   kiln_scale_bench pack --project DIR --fatbin FILE --targets T1,T2,... --dist DIR
//       kiln build's work after the compiles: the project read and hashed, the build planned,
//       each archive's content assembled (archive_content, as run_build does) and the release
//       published (publish_release: archives packed and the index written). Every artifact is
//       FILE: nvcc is not run 20,000 x 7 times. Prints one JSON object of seconds per step.
//   kiln_scale_bench get (--library FILE --symbol NAME | --description FILE) --store DIR
//                        --cache DIR --first URI [--next N] [--shift K] [--evict DIR]
//                        [--warm B [--warm-threads T]]
//       a fresh process's first get (Loader created, get(URI): what an application calls), then
//       N further gets of other URIs spread over the package (each a URI the process has not
//       loaded; --shift K moves the spread by K places, so that processes given different K ask
//       URIs no other one asked). The package is the one a library made from `kiln package-source
//       --output` defines (dlopen'ed and its function called before the clock starts, as an
//       application has its package library loaded), or a description file read before the
//       clock starts. --store installed: no artifact path, the store installed beside the
//       package library (<prefix>/share/kiln/artifacts for <prefix>/lib/LIBRARY) and the rest
//       of the config from the environment (KILN_OFFLINE, KILN_DISABLE_JIT, KILN_CACHE_DIR;
//       --cache, when given, wins). --evict DIR: before the clock starts, the page cache of
//       every file in DIR and its subdirectories is dropped (posix_fadvise DONTNEED: this
//       process's own files only, the kernel's other caches stay), as after memory pressure.
//       The driver is libcuda.so.1 as found: run it with build/bench/stand-in first on
//       LD_LIBRARY_PATH to need no GPU. Prints one JSON object: first_us and next_us (each
//       further get), first_inblock and next_inblock (blocks this process read from a disk
//       during the first get and during all further gets, getrusage's ru_inblock: 0 when
//       everything came from the page cache). --warm B: then warm gets of URI (in-process
//       hits) in B batches of 10,000 calls, on this thread and on T threads at once (default
//       16): "warm_ns" and "warm_threads_ns", the median ns per call of the batches.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "builder/build.hpp"
#include "format/target.hpp"
#include "io/atomic_file.hpp"
#include "kiln/error.hpp"
#include "kiln/loader.hpp"
#include "kiln/version.hpp"
#include "project/package.hpp"
#include "project/package_description.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

[[noreturn]] void usage() {
  std::fprintf(
      stderr,
      "usage: kiln_scale_bench pack --project DIR --fatbin FILE --targets T,... --dist DIR\n"
      "       kiln_scale_bench get (--library FILE --symbol NAME | --description FILE) "
      "--store DIR|installed [--cache DIR] --first URI [--next N] [--shift K] [--evict DIR] "
      "[--warm B [--warm-threads T]]\n");
  std::exit(2);
}

std::map<std::string, std::string> options(int argc, char** argv) {
  std::map<std::string, std::string> o;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string key = argv[i];
    if (key.rfind("--", 0) != 0) usage();
    o[key.substr(2)] = argv[i + 1];
  }
  return o;
}

const std::string& need(const std::map<std::string, std::string>& o, const std::string& key) {
  auto it = o.find(key);
  if (it == o.end()) usage();
  return it->second;
}

int pack(const std::map<std::string, std::string>& o) {
  using namespace kiln;
  std::vector<format::Target> targets;
  std::string list = need(o, "targets");
  for (std::size_t at = 0; at <= list.size();) {
    std::size_t comma = std::min(list.find(',', at), list.size());
    auto t = format::parse_target(list.substr(at, comma - at));
    if (!t) usage();
    targets.push_back(*t);
    at = comma + 1;
  }
  const std::string fatbin = io::read_whole_file(need(o, "fatbin"));
  const std::string dir = fs::absolute(need(o, "project")).string();

  auto t0 = Clock::now();
  project::Project project = project::load_project(dir);
  const double load_s = seconds_since(t0);
  t0 = Clock::now();
  builder::BuildPlan plan = builder::plan_build(project.registry, targets, {}, dir);
  const double plan_s = seconds_since(t0);
  // As run_build: each target's content assembled when publish_release asks for it.
  // The description too, which kiln build publishes beside the index.
  const project::PackageData described(project);
  builder::PackageIdentity id{project.name, project.version, "", kiln::cuda_version(),
                              project::package_description_json(*described.get()), {}};
  id.provenance.kiln_version = kiln::version();
  id.provenance.hosts = {builder::host_name()};
  id.provenance = builder::build_provenance(id, kiln::cuda_full_version(), 1700000000,
                                            "SOURCE_DATE_EPOCH", targets);
  double content_s = 0;
  auto content = [&](std::size_t t) {
    auto c0 = Clock::now();
    builder::ArchiveContent c = builder::archive_content(plan.targets.at(t), project.registry, id, 1700000000, dir,
                                       [&](const builder::PlannedArtifact&, const project::Specialisation& spec) {
                                         builder::CompiledArtifact a{fatbin, {}};
                                         for (const auto& e : spec.entries)
                                           a.entries.push_back({e, "scale_kernel"});
                                         return a;
                                       });
    content_s += seconds_since(c0);
    return c;
  };
  t0 = Clock::now();
  std::string index;
  builder::publish_release(id, plan.targets.size(), content, 1700000000, need(o, "dist"), &index);
  const double publish_s = seconds_since(t0) - content_s;
  std::printf(
      "{\"artifacts\": %zu, \"load_project_s\": %.4f, \"plan_s\": %.4f, \"content_s\": %.4f, "
      "\"publish_s\": %.4f}\n",
      plan.artifact_count(), load_s, plan_s, content_s, publish_s);
  return 0;
}

// Blocks this process has read from a disk so far (what the page cache did not hold).
long inblock() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return ru.ru_inblock;
}

// Drops the page cache of every regular file under `dir` (this process's own: the kernel
// writes nothing back, the files are clean).
void evict_page_cache(const std::string& dir) {
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const int fd = ::open(it->path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

// The package to serve: a package library's, or a description file's (kept in `data`).
const kiln_package& package_of(const std::map<std::string, std::string>& o,
                               std::unique_ptr<kiln::project::PackageData>& data) {
  if (o.count("library")) {
    void* lib = ::dlopen(o.at("library").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) throw kiln::Error(kiln::ErrorKind::NotFound, std::string("dlopen: ") + ::dlerror());
    using PackageFn = const kiln_package* (*)();
    auto fn = reinterpret_cast<PackageFn>(::dlsym(lib, need(o, "symbol").c_str()));
    if (!fn) throw kiln::Error(kiln::ErrorKind::NotFound, "no " + need(o, "symbol") + " in it");
    return *fn();
  }
  data = kiln::project::load_package_description(need(o, "description"));
  return *data->get();
}

// --warm B: warm gets of `uri` (in-process hits), in B batches of 10,000 calls on this thread,
// then B batches on each of `threads` threads at once; the median ns per call of each, as JSON
// keys to append: "warm_ns" and "warm_threads_ns" (all threads' batches pooled).
std::string warm_gets(kiln::Loader& loader, const std::string& uri, std::size_t batches,
                      std::size_t threads) {
  constexpr int kCalls = 10000;
  auto run = [&](std::vector<double>& out) {
    for (std::size_t b = 0; b < batches; ++b) {
      const auto t0 = Clock::now();
      for (int i = 0; i < kCalls; ++i) loader.get(uri);
      out.push_back(seconds_since(t0) * 1e9 / kCalls);
    }
  };
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  std::vector<double> one;
  run(one);
  std::vector<std::vector<double>> per(threads);
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < threads; ++t) pool.emplace_back([&, t] { run(per[t]); });
  for (auto& t : pool) t.join();
  std::vector<double> all;
  for (const auto& v : per) all.insert(all.end(), v.begin(), v.end());
  char buf[96];
  std::snprintf(buf, sizeof buf, ", \"warm_ns\": %.2f, \"warm_threads_ns\": %.2f", median(one),
                median(all));
  return buf;
}

int get(const std::map<std::string, std::string>& o) {
  std::unique_ptr<kiln::project::PackageData> data;
  const kiln_package& package = package_of(o, data);
  kiln::LoaderConfig cfg;
  if (o.count("store") && o.at("store") == "installed") {
    // The store installed beside the package's library, the config from the environment.
    cfg = kiln::LoaderConfig::from_env();
    if (o.count("cache")) cfg.cache_dir = o.at("cache");
  } else {
    cfg.artifact_path = {need(o, "store")};
    cfg.cache_dir = need(o, "cache");
    cfg.offline = true;
    cfg.disable_jit = true;
    cfg.use_installed_store = false;
  }
  const std::string first = need(o, "first");
  const std::size_t next = o.count("next") ? std::stoul(o.at("next")) : 0;
  const std::size_t shift = o.count("shift") ? std::stoul(o.at("shift")) : 0;
  // Further URIs: spread over the package, each once, none of them `first` (at most n - 1).
  std::vector<std::string> uris;
  std::set<std::string> taken = {first};
  const std::size_t n = package.kernel_count;
  for (std::size_t i = 0; uris.size() < next && i < 4 * n; ++i) {
    std::string u = package.kernels[((i + shift) * 7919 + n / 2 + 1) % n].uri;
    if (taken.insert(u).second) uris.push_back(u);
  }
  if (o.count("evict")) evict_page_cache(o.at("evict"));

  const long inblock0 = inblock();
  auto t0 = Clock::now();
  kiln::Loader loader(package, cfg);
  loader.get(first);
  const double first_us = seconds_since(t0) * 1e6;
  const long inblock1 = inblock();
  std::string next_us;
  for (const auto& u : uris) {
    t0 = Clock::now();
    loader.get(u);
    char one[32];
    std::snprintf(one, sizeof one, "%s%.2f", next_us.empty() ? "" : ", ", seconds_since(t0) * 1e6);
    next_us += one;
  }
  const long inblock2 = inblock();
  std::printf(
      "{\"kernels\": %zu, \"first_us\": %.2f, \"next_us\": [%s], \"first_inblock\": %ld, "
      "\"next_inblock\": %ld%s}\n",
      n, first_us, next_us.c_str(), inblock1 - inblock0, inblock2 - inblock1,
      o.count("warm") ? warm_gets(loader, first, std::stoul(o.at("warm")),
                                  o.count("warm-threads") ? std::stoul(o.at("warm-threads")) : 16)
                            .c_str()
                      : "");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) usage();
  const std::string mode = argv[1];
  try {
    if (mode == "pack") return pack(options(argc, argv));
    if (mode == "get") return get(options(argc, argv));
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "kiln_scale_bench %s: %s\n", mode.c_str(), e.what());
    return 1;
  }
  usage();
}
