// kiln load-path benchmark: what get() costs warm (in-process hit), cold from a local store, the
// floor for cold (the same bytes read, hashed and loaded by bare code), NVRTC JIT cold, and a
// fetch from an HTTP mirror on loopback. Prints one markdown table (docs/performance.md): the
// rows, then the cold get of each artifact phase by phase (cold_phases.hpp: the loader's own
// timers, not a re-implementation here).
//
// Timing: host std::chrono::steady_clock around calls that are synchronous (get() returns after
// the driver load; launches are followed by cudaStreamSynchronize). A cold get is a new Loader
// and its first get(): Loader creation is a phase of it.
//
// Usage: kiln_load_bench --store DIR [--mirror URL --index FILE] [--out FILE] [--json FILE]
//                        [--cold-only] [--iterations N] [--first-cache DIR] [--no-gpu [--cc 90]]
//   --store   a store made by `kiln install` (the archive the loader picks for the device is the
//             one the floor reads: cold get and the floor hash the same file)
//   --mirror  base URL serving the dist directory (index + archives), e.g. python3 -m http.server
//   --index   that dist directory's index file (its SHA-256 pins the mirror)
//   --json    also write every row and the per-phase medians as JSON
//   --cold-only   only the cold rows (no warm, JIT or fetch rows)
//   --no-gpu  no CUDA device needed: the loader runs over a driver that accepts any image
//             (nothing reaches a GPU), the floor is read + SHA-256; cold rows only, for device
//             compute capability --cc (default 90)
//   --first-cache  the cache directory of the process's first cold get (default: a new empty
//             one). The store's scan record (core/store/scan_record.hpp) is kept there, so a
//             second run with the same DIR measures the first get of a process after the first
//             since the install, as every later process of an application has it
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "format/manifest.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "kiln/kernels.h"
#include "kiln/loader.hpp"
#include "loader_factory.hpp"
#include "plan/resolver.hpp"
#include "runtime/cold_phases.hpp"
#include "runtime/driver.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double ns_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
}

struct Stats {
  double median = 0, min = 0, max = 0;
  std::size_t count = 0;
};

Stats stats(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.count = v.size();
  s.min = v.front();
  s.max = v.back();
  s.median = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  return s;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Artifact {
  std::string uri, path, sha256, symbol;
  std::uint64_t size = 0;
};

// The archive the loader picks for a device of compute capability cc (resolve() with the same
// configuration, so the floor reads the file get() loads): axpy_dtype_f32 and its largest
// artifact.
std::pair<Artifact, Artifact> pick_artifacts(const kiln::LoaderConfig& cfg, int cc,
                                             const kiln::plan::LoaderDeps& deps) {
  auto probe = kiln::make_loader(*kiln_kernels_package(), cfg, deps);
  kiln::Resolution r = probe->resolve("axpy_dtype_f32", cc);
  if (!r.chosen || r.chosen->tier != "store")
    throw kiln::Error(kiln::ErrorKind::NotFound, "the store serves no axpy_dtype_f32 for CC " +
                                                     std::to_string(cc) + ": " + r.to_json());
  fs::path dir = fs::path(r.chosen->path).parent_path();
  fs::path m = dir / "manifest.json";
  kiln::format::Manifest man = kiln::format::parse_manifest(read_all(m), m.string());
  std::vector<Artifact> all;
  for (const auto& a : man.artifacts)
    all.push_back({a.uri, (dir / a.file).string(), a.sha256, a.entries.at(0).symbol, a.size});
  std::sort(all.begin(), all.end(),
            [](const Artifact& x, const Artifact& y) { return x.size < y.size; });
  auto small = std::find_if(all.begin(), all.end(),
                            [](const Artifact& x) { return x.uri == "axpy_dtype_f32"; });
  return {*small, all.back()};
}

// --no-gpu: a driver that accepts every image and returns placeholder handles, so get() runs
// its whole cold path except the real driver calls.
class NoGpuDriver : public kiln::runtime::Driver {
 public:
  explicit NoGpuDriver(int cc) : cc_(cc) {}
  void init() override {}
  int driver_version() override { return 0; }
  std::vector<kiln::runtime::DeviceInfo> devices() override { return {{0, "no GPU", cc_}}; }
  void* current_context() override { return &cc_; }
  int current_device_cc() override { return cc_; }
  bool stream_is_capturing(void*) override { return false; }
  void* load_library(const std::string& image) override { return image.empty() ? nullptr : &cc_; }
  unsigned kernel_count(void*) override { return 1; }
  void* get_kernel(void*, const std::string&) override { return &cc_; }
  void* kernel_function(void*) override { return &cc_; }
  void unload_library(void*) noexcept override {}
  void launch(void*, const unsigned*, const unsigned*, unsigned, void*, void**) override {
    throw kiln::Error(kiln::ErrorKind::Unsupported, "--no-gpu: nothing is launched");
  }

 private:
  int cc_;
};

// Per-phase medians of the cold gets of one artifact (us), in phase order.
struct PhaseRow {
  std::string uri;
  std::vector<double> median_us;  // kiln::cold::kPhaseCount values
  double total_us = 0;            // median of the per-get sums
};

PhaseRow phase_row(const std::string& uri, const std::vector<kiln::runtime::cold::PhaseTimes>& runs) {
  PhaseRow row;
  row.uri = uri;
  for (int p = 0; p < kiln::runtime::cold::kPhaseCount; ++p) {
    std::vector<double> v;
    for (const auto& r : runs) v.push_back(r.ns[p] / 1e3);
    row.median_us.push_back(stats(v).median);
  }
  std::vector<double> totals;
  for (const auto& r : runs) totals.push_back(r.total() / 1e3);
  row.total_us = stats(totals).median;
  return row;
}

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      o += '\\', o += c;
    else if (static_cast<unsigned char>(c) < 0x20)
      o += ' ';
    else
      o += c;
  }
  return o + "\"";
}

template <typename F>
F driver_fn(const char* name, unsigned version) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion(name, &p, version, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess) {
    std::fprintf(stderr, "driver entry point %s unavailable\n", name);
    std::exit(2);
  }
  return reinterpret_cast<F>(p);
}

kiln::LoaderConfig store_config(const std::string& store, const std::string& cache) {
  kiln::LoaderConfig c;
  c.artifact_path = {store};
  c.cache_dir = cache;
  c.offline = true;
  c.disable_jit = true;
  c.use_installed_store = false;
  c.log_level = "error";
  return c;
}

struct Row {
  std::string name, unit;
  Stats s;
  std::string note;
};

std::string fmt(double v) {
  char b[64];
  std::snprintf(b, sizeof b, v >= 100 ? "%.0f" : v >= 10 ? "%.1f" : "%.3f", v);
  return b;
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "kiln-bench-XXXXXX").string();
    if (!mkdtemp(t.data())) std::exit(2);
    path = t;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// One cold get: a new Loader and its first get(), with the phase timers on. The cache directory
// is shared by every cold get (the first store serves, so it is never read).
template <typename MakeLoader>
void cold_get(const Artifact& a, const std::string& cache, MakeLoader make,
              std::vector<double>& total, std::vector<kiln::runtime::cold::PhaseTimes>& phases) {
  kiln::runtime::cold::PhaseTimes times;
  kiln::runtime::cold::set_phase_sink(&times);
  auto t0 = Clock::now();
  {
    auto l = make(cache);
    l->get(a.uri);
    total.push_back(ns_since(t0) / 1e3);
  }
  kiln::runtime::cold::set_phase_sink(nullptr);
  phases.push_back(times);
}

}  // namespace

int main(int argc, char** argv) {
  // Before the driver initialises: the cold JIT row must not hit the driver's compute cache.
  setenv("CUDA_CACHE_DISABLE", "1", 1);
  std::string store, mirror, index, out, json_out, first_cache_dir;
  bool no_gpu = false, cold_only = false;
  int cc = 90, kCold = 50;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--store")
      store = value();
    else if (a == "--mirror")
      mirror = value();
    else if (a == "--index")
      index = value();
    else if (a == "--out")
      out = value();
    else if (a == "--json")
      json_out = value();
    else if (a == "--cc")
      cc = std::atoi(value().c_str());
    else if (a == "--iterations")
      kCold = std::max(1, std::atoi(value().c_str()));
    else if (a == "--no-gpu")
      no_gpu = cold_only = true;
    else if (a == "--cold-only")
      cold_only = true;
    else if (a == "--first-cache")
      first_cache_dir = value();
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (store.empty()) {
    std::fprintf(stderr,
                 "usage: kiln_load_bench --store DIR [--mirror URL --index FILE] [--out FILE] "
                 "[--json FILE] [--cold-only] [--iterations N] [--first-cache DIR] "
                 "[--no-gpu [--cc CC]]\n");
    return 2;
  }
  std::string device = "none (--no-gpu: a driver that accepts every image, CC " +
                       std::to_string(cc / 10) + "." + std::to_string(cc % 10) + ")";
  if (!no_gpu) {
    if (cudaSetDevice(0) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) {
      std::fprintf(stderr, "no CUDA device (--no-gpu measures without one)\n");
      return 5;
    }
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, 0);
    cc = prop.major * 10 + prop.minor;
    device = std::string(prop.name) + " (CC " + std::to_string(prop.major) + "." +
             std::to_string(prop.minor) + ")";
  }
  kiln::plan::LoaderDeps deps;
  if (no_gpu) deps.driver = std::make_shared<NoGpuDriver>(cc);
  std::vector<Row> rows;
  std::vector<PhaseRow> phase_rows;

  try {
    // The first cold get of this process, before anything else touched the loader: it also
    // pays what happens once per process (registry parse, the driver object, OpenSSL's first
    // use, manifest parse with nothing remembered yet).
    {
      TempDir first_cache;
      std::vector<double> first;
      std::vector<kiln::runtime::cold::PhaseTimes> first_phases;
      Artifact axpy;
      axpy.uri = "axpy_dtype_f32";
      const bool recorded =
          !first_cache_dir.empty() && std::filesystem::exists(first_cache_dir + "/scan");
      cold_get(
          axpy, first_cache_dir.empty() ? first_cache.path.string() : first_cache_dir,
          [&](const std::string& cache) { return kiln::make_loader(*kiln_kernels_package(), store_config(store, cache), deps); },
          first, first_phases);
      rows.push_back({"first cold get of the process, axpy_dtype_f32", "us", stats(first),
                      std::string("once per process: registry, driver object, OpenSSL first use, "
                                  "store listing and manifest check (") +
                          (recorded ? "from the cache's scan record" : "no scan record yet") +
                          "); phases below"});
      phase_rows.push_back(phase_row(recorded ? "axpy_dtype_f32 (first of the process, scan record)"
                                              : "axpy_dtype_f32 (first of the process)",
                                     first_phases));
    }
    TempDir probe_cache;
    auto [small, large] = pick_artifacts(store_config(store, probe_cache.path.string()), cc, deps);

    // (a) warm get: one thread, then 16 threads, each timing batches of calls.
    if (!cold_only) {
      TempDir cache;
      kiln::Loader l(*kiln_kernels_package(), store_config(store, cache.path.string()));
      l.get(small.uri);
      const int kBatch = 10000, kBatches = 200;
      auto run_batches = [&](std::vector<double>& per_call) {
        cudaSetDevice(0);
        volatile std::size_t sink = 0;
        for (int b = 0; b < kBatches; ++b) {
          auto t0 = Clock::now();
          for (int i = 0; i < kBatch; ++i) sink = sink + l.get(small.uri).functions.size();
          per_call.push_back(ns_since(t0) / kBatch);
        }
      };
      std::vector<double> one;
      run_batches(one);
      rows.push_back({"warm get, 1 thread", "ns/call", stats(one),
                      "batches of " + std::to_string(kBatch) + " calls; " + small.uri});
      const int kThreads = 16;
      std::vector<std::vector<double>> per(kThreads);
      std::vector<std::thread> ts;
      for (int t = 0; t < kThreads; ++t) ts.emplace_back([&, t] { run_batches(per[t]); });
      for (auto& t : ts) t.join();
      std::vector<double> all;
      for (auto& v : per) all.insert(all.end(), v.begin(), v.end());
      rows.push_back({"warm get, 16 threads", "ns/call", stats(all),
                      "per-thread batches of " + std::to_string(kBatch) + ", all threads pooled"});
    }

    // (b) cold get from the store (new Loader + first get), and (c) its floor, for the smallest
    // and largest artifact of the archive the loader picks. Both hash with OpenSSL.
    PFN_cuLibraryLoadData_v12000 lib_load = nullptr;
    PFN_cuLibraryGetKernel_v12000 lib_kernel = nullptr;
    PFN_cuKernelGetFunction_v12000 kernel_fn = nullptr;
    PFN_cuLibraryUnload_v12000 lib_unload = nullptr;
    if (!no_gpu) {
      lib_load = driver_fn<PFN_cuLibraryLoadData_v12000>("cuLibraryLoadData", 12000);
      lib_kernel = driver_fn<PFN_cuLibraryGetKernel_v12000>("cuLibraryGetKernel", 12000);
      kernel_fn = driver_fn<PFN_cuKernelGetFunction_v12000>("cuKernelGetFunction", 12000);
      lib_unload = driver_fn<PFN_cuLibraryUnload_v12000>("cuLibraryUnload", 12000);
    }
    auto new_loader = [&](const std::string& cache) {
      return kiln::make_loader(*kiln_kernels_package(), store_config(store, cache), deps);
    };
    // The floor: the same file read, hashed, and (with a GPU) loaded by bare code. Returns false
    // when the driver refuses the image.
    auto floor_once = [&](const Artifact& a, std::vector<double>& floor) {
      auto t0 = Clock::now();
      std::string bytes = read_all(a.path);
      unsigned char md[EVP_MAX_MD_SIZE];
      unsigned mdlen = 0;
      if (EVP_Digest(bytes.data(), bytes.size(), md, &mdlen, EVP_sha256(), nullptr) != 1)
        return false;
      if (no_gpu) {
        floor.push_back(ns_since(t0) / 1e3);
        return true;
      }
      CUlibrary lib = nullptr;
      CUkernel k = nullptr;
      CUfunction f = nullptr;
      if (lib_load(&lib, bytes.data(), nullptr, nullptr, 0, nullptr, nullptr, 0) != CUDA_SUCCESS ||
          lib_kernel(&k, lib, a.symbol.c_str()) != CUDA_SUCCESS ||
          kernel_fn(&f, k) != CUDA_SUCCESS) {
        std::fprintf(stderr, "floor: driver load of %s failed\n", a.path.c_str());
        return false;
      }
      floor.push_back(ns_since(t0) / 1e3);
      lib_unload(lib);
      return true;
    };
    TempDir cold_cache;
    for (const Artifact* a : {&small, &large}) {
      std::vector<double> cold, first_launch, floor;
      std::vector<kiln::runtime::cold::PhaseTimes> phases;
      // Warm-up: the first Loader of the process also parses the embedded registry and opens
      // the driver; that once-per-process cost is the fresh-process benchmark's (kiln_cold_start).
      {
        std::vector<double> ignore;
        std::vector<kiln::runtime::cold::PhaseTimes> ignore_p;
        cold_get(*a, cold_cache.path.string(), new_loader, ignore, ignore_p);
        if (!floor_once(*a, ignore)) return 1;
      }
      // Alternating, so that both see the same machine (load, caches, clock).
      for (int i = 0; i < kCold; ++i) {
        cold_get(*a, cold_cache.path.string(), new_loader, cold, phases);
        if (!floor_once(*a, floor)) return 1;
      }
      if (!no_gpu && a->uri.rfind("axpy_dtype_f32", 0) == 0) {
        for (int i = 0; i < kCold; ++i) {
          auto l = new_loader(cold_cache.path.string());
          const kiln::KernelHandle& h = l->get(a->uri);
          long long n = 1;
          float alpha = 1.0f;
          float* buf = nullptr;
          cudaMalloc(&buf, 8);
          void* args[] = {&n, &alpha, &buf, &buf};
          auto t1 = Clock::now();
          l->launch(h, 0, {1, 1, 1}, {256, 1, 1}, 0, nullptr, args);
          cudaStreamSynchronize(nullptr);
          first_launch.push_back(ns_since(t1) / 1e3);
          cudaFree(buf);
        }
      }
      Stats c = stats(cold), f = stats(floor);
      std::string sz = std::to_string(a->size) + " B";
      std::string what = no_gpu ? "(store: create Loader, resolve, read, verify; no driver), "
                                : "(store: create Loader, resolve, read, verify, load), ";
      rows.push_back({"cold get " + what + a->uri, "us", c,
                      sz + "; new Loader each time" +
                          (no_gpu ? "" : ", driver load included, launch excluded") +
                          "; cold/floor = " + fmt(c.median / f.median)});
      rows.push_back({std::string(no_gpu ? "floor: read + SHA-256, "
                                         : "floor: read + SHA-256 + cuLibraryLoadData + "
                                           "GetKernel + GetFunction, ") +
                          a->uri,
                      "us", f, sz + "; bare code, same file"});
      if (!first_launch.empty())
        rows.push_back({"first launch + sync after cold get, " + a->uri, "us", stats(first_launch),
                        "reported apart from cold get"});
      phase_rows.push_back(phase_row(a->uri, phases));
    }

    // (d) NVRTC JIT cold: empty store, empty JIT cache each iteration, CUDA_CACHE_DISABLE=1.
    const int kJit = cold_only ? 0 : 5;
    for (const Artifact* a : {&small, &large}) {
      if (kJit == 0) break;
      std::vector<double> jit;
      for (int i = 0; i < kJit; ++i) {
        TempDir tmp;
        fs::create_directories(tmp.path / "empty");
        kiln::LoaderConfig c =
            store_config((tmp.path / "empty").string(), (tmp.path / "cache").string());
        c.disable_jit = false;
        kiln::Loader l(*kiln_kernels_package(), c);
        auto t0 = Clock::now();
        const kiln::KernelHandle& h = l.get(a->uri);
        jit.push_back(ns_since(t0) / 1e3);
        if (h.origin.rfind("jit:", 0) != 0) {
          std::fprintf(stderr, "JIT row: %s came from %s, not JIT\n", a->uri.c_str(),
                       h.origin.c_str());
          return 1;
        }
      }
      Stats j = stats(jit);
      double cold_med = 0;
      for (const auto& r : rows)
        if (r.name.rfind("cold get ", 0) == 0 && r.name.size() >= a->uri.size() &&
            r.name.compare(r.name.size() - a->uri.size(), a->uri.size(), a->uri) == 0)
          cold_med = r.s.median;
      rows.push_back({"NVRTC JIT cold, " + a->uri, "us", j,
                      "CUDA_CACHE_DISABLE=1, empty JIT cache dir each time; JIT/cold = " +
                          fmt(j.median / cold_med)});
    }

    // (e) fetch from an HTTP mirror on loopback: download + verify + unpack + load.
    if (cold_only) {
    } else if (!mirror.empty() && !index.empty()) {
      std::string pin = kiln::io::sha256_hex(read_all(index));
      std::vector<double> fetch;
      for (int i = 0; i < 5; ++i) {
        TempDir tmp;
        fs::create_directories(tmp.path / "empty");
        kiln::LoaderConfig c =
            store_config((tmp.path / "empty").string(), (tmp.path / "cache").string());
        c.offline = false;
        c.mirrors = {mirror};
        c.index_sha256 = pin;
        kiln::Loader l(*kiln_kernels_package(), c);
        auto t0 = Clock::now();
        const kiln::KernelHandle& h = l.get(small.uri);
        fetch.push_back(ns_since(t0) / 1e3);
        if (h.origin.find(tmp.path.string()) != 0) {
          std::fprintf(stderr, "fetch row: loaded from %s\n", h.origin.c_str());
          return 1;
        }
      }
      rows.push_back({"fetch from mirror (loopback HTTP) + verify + unpack + load, " + small.uri,
                      "us", stats(fetch), "the archive for the device fetched; server: " + mirror});
    } else {
      rows.push_back({"fetch from mirror", "-", {}, "not measured: no --mirror/--index given"});
    }
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "kiln error (%s): %s\n", kiln::to_string(e.kind()), e.what());
    return kiln::exit_code(e.kind());
  }

  std::ostringstream md;
  md << "Device: " << device << "; timing: host steady_clock around synchronous calls.\n\n";
  md << "| measurement | unit | median | min | max | count | notes |\n";
  md << "|---|---|---|---|---|---|---|\n";
  for (const auto& r : rows)
    md << "| " << r.name << " | " << r.unit << " | " << (r.s.count ? fmt(r.s.median) : "-") << " | "
       << (r.s.count ? fmt(r.s.min) : "-") << " | " << (r.s.count ? fmt(r.s.max) : "-") << " | "
       << r.s.count << " | " << r.note << " |\n";
  md << "\nCold get phase by phase (median us of each phase over the cold gets above; the "
        "loader's own timers, exclusive, so a row adds up to its total):\n\n| artifact |";
  for (int p = 0; p < kiln::runtime::cold::kPhaseCount; ++p)
    md << " " << kiln::runtime::cold::phase_name(static_cast<kiln::runtime::cold::Phase>(p)) << " |";
  md << " total |\n|---|";
  for (int p = 0; p <= kiln::runtime::cold::kPhaseCount; ++p) md << "---|";
  md << "\n";
  for (const auto& pr : phase_rows) {
    md << "| " << pr.uri << " |";
    for (double v : pr.median_us) md << " " << fmt(v) << " |";
    md << " " << fmt(pr.total_us) << " |\n";
  }
  std::cout << md.str();
  if (!out.empty()) std::ofstream(out) << md.str();
  if (!json_out.empty()) {
    std::ofstream j(json_out);
    auto num = [](double v) {
      char b[64];
      std::snprintf(b, sizeof b, "%.3f", v);
      return std::string(b);
    };
    j << "{\"device\": " << json_str(device) << ", \"rows\": [";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      j << (i ? ", " : "") << "{\"name\": " << json_str(r.name)
        << ", \"unit\": " << json_str(r.unit) << ", \"median\": " << num(r.s.median)
        << ", \"min\": " << num(r.s.min) << ", \"max\": " << num(r.s.max)
        << ", \"count\": " << r.s.count << ", \"notes\": " << json_str(r.note) << "}";
    }
    j << "], \"cold_phases_us\": [";
    for (std::size_t i = 0; i < phase_rows.size(); ++i) {
      const PhaseRow& pr = phase_rows[i];
      j << (i ? ", " : "") << "{\"uri\": " << json_str(pr.uri);
      for (int p = 0; p < kiln::runtime::cold::kPhaseCount; ++p)
        j << ", " << json_str(kiln::runtime::cold::phase_name(static_cast<kiln::runtime::cold::Phase>(p))) << ": "
          << num(pr.median_us[p]);
      j << ", \"total\": " << num(pr.total_us) << "}";
    }
    j << "]}\n";
    if (!j) {
      std::fprintf(stderr, "cannot write %s\n", json_out.c_str());
      return 9;
    }
  }
  return 0;
}
