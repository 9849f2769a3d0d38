// kiln load-path benchmark: what get() costs warm (in-process hit), cold from a local store, the
// floor for cold (the same bytes read, hashed and loaded by bare code), NVRTC JIT cold, and a
// fetch from an HTTP mirror on loopback. Prints one markdown table (docs/performance.md).
//
// Timing: host std::chrono::steady_clock around calls that are synchronous (get() returns after
// the driver load; launches are followed by cudaStreamSynchronize).
//
// Usage: kiln_load_bench --store DIR [--mirror URL --index FILE] [--out FILE]
//   --store   a store made by `kiln install` holding only the sm_90 archive (so cold get and the
//             floor read the same file)
//   --mirror  base URL serving the dist directory (index + archives), e.g. python3 -m http.server
//   --index   that dist directory's index file (its SHA-256 pins the mirror)
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

#include "kiln/error.hpp"
#include "kiln/loader.hpp"
#include "kiln/manifest.hpp"
#include "kiln/sha256.hpp"

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

// The sm_90 archive of the store: its smallest and largest artifacts.
std::pair<Artifact, Artifact> pick_artifacts(const std::string& store) {
  for (const auto& d : fs::directory_iterator(store)) {
    fs::path m = d.path() / "manifest.json";
    if (!fs::exists(m)) continue;
    kiln::Manifest man = kiln::parse_manifest(read_all(m), m.string());
    if (man.target != "sm_90") continue;
    std::vector<Artifact> all;
    for (const auto& a : man.artifacts)
      all.push_back(
          {a.uri, (d.path() / a.file).string(), a.sha256, a.entries.at(0).symbol, a.size});
    // Small: axpy f32 (also launched for the first-launch row); large: the biggest artifact.
    std::sort(all.begin(), all.end(),
              [](const Artifact& x, const Artifact& y) { return x.size < y.size; });
    auto small = std::find_if(all.begin(), all.end(),
                              [](const Artifact& x) { return x.uri == "axpy_dtype_f32"; });
    if (small != all.end()) return {*small, all.back()};
  }
  throw kiln::Error(kiln::ErrorKind::NotFound, "no sm_90 archive in store " + store);
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

}  // namespace

int main(int argc, char** argv) {
  // Before the driver initialises: the cold JIT row must not hit the driver's compute cache.
  setenv("CUDA_CACHE_DISABLE", "1", 1);
  std::string store, mirror, index, out;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--store")
      store = argv[i + 1];
    else if (a == "--mirror")
      mirror = argv[i + 1];
    else if (a == "--index")
      index = argv[i + 1];
    else if (a == "--out")
      out = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (store.empty()) {
    std::fprintf(stderr,
                 "usage: kiln_load_bench --store DIR [--mirror URL --index FILE] [--out FILE]\n");
    return 2;
  }
  if (cudaSetDevice(0) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) {
    std::fprintf(stderr, "no CUDA device\n");
    return 5;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  auto [small, large] = pick_artifacts(store);
  std::vector<Row> rows;

  try {
    // (a) warm get: one thread, then 16 threads, each timing batches of calls.
    {
      TempDir cache;
      kiln::Loader l(store_config(store, cache.path.string()));
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

    // (b) cold get from the store, and (c) its floor, for the smallest and largest artifact.
    auto lib_load = driver_fn<PFN_cuLibraryLoadData_v12000>("cuLibraryLoadData", 12000);
    auto lib_kernel = driver_fn<PFN_cuLibraryGetKernel_v12000>("cuLibraryGetKernel", 12000);
    auto kernel_fn = driver_fn<PFN_cuKernelGetFunction_v12000>("cuKernelGetFunction", 12000);
    auto lib_unload = driver_fn<PFN_cuLibraryUnload_v12000>("cuLibraryUnload", 12000);
    const int kCold = 50;
    for (const Artifact* a : {&small, &large}) {
      std::vector<double> cold, first_launch, floor;
      for (int i = 0; i < kCold; ++i) {
        TempDir cache;
        kiln::Loader l(store_config(store, cache.path.string()));
        auto t0 = Clock::now();
        const kiln::KernelHandle& h = l.get(a->uri);
        cold.push_back(ns_since(t0) / 1e3);
        if (a->uri.rfind("axpy_dtype_f32", 0) == 0) {
          long long n = 1;
          float alpha = 1.0f;
          float* buf = nullptr;
          cudaMalloc(&buf, 8);
          void* args[] = {&n, &alpha, &buf, &buf};
          auto t1 = Clock::now();
          l.launch(h, 0, {1, 1, 1}, {256, 1, 1}, 0, nullptr, args);
          cudaStreamSynchronize(nullptr);
          first_launch.push_back(ns_since(t1) / 1e3);
          cudaFree(buf);
        }
      }
      for (int i = 0; i < kCold; ++i) {
        auto t0 = Clock::now();
        std::string bytes = read_all(a->path);
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned mdlen = 0;
        if (EVP_Digest(bytes.data(), bytes.size(), md, &mdlen, EVP_sha256(), nullptr) != 1)
          return 1;
        CUlibrary lib = nullptr;
        CUkernel k = nullptr;
        CUfunction f = nullptr;
        if (lib_load(&lib, bytes.data(), nullptr, nullptr, 0, nullptr, nullptr, 0) !=
                CUDA_SUCCESS ||
            lib_kernel(&k, lib, a->symbol.c_str()) != CUDA_SUCCESS ||
            kernel_fn(&f, k) != CUDA_SUCCESS) {
          std::fprintf(stderr, "floor: driver load of %s failed\n", a->path.c_str());
          return 1;
        }
        floor.push_back(ns_since(t0) / 1e3);
        lib_unload(lib);
      }
      Stats c = stats(cold), f = stats(floor);
      std::string sz = std::to_string(a->size) + " B";
      rows.push_back({"cold get (store: read, verify, load), " + a->uri, "us", c,
                      sz +
                          "; new Loader each time, driver load included, launch excluded; "
                          "cold/floor = " +
                          fmt(c.median / f.median)});
      rows.push_back({"floor: read + SHA-256 + cuLibraryLoadData + GetKernel, " + a->uri, "us", f,
                      sz + "; bare code, same bytes"});
      if (!first_launch.empty())
        rows.push_back({"first launch + sync after cold get, " + a->uri, "us", stats(first_launch),
                        "reported apart from cold get"});
    }

    // (d) NVRTC JIT cold: empty store, empty JIT cache each iteration, CUDA_CACHE_DISABLE=1.
    const int kJit = 5;
    std::vector<Stats> cold_medians;
    for (const Artifact* a : {&small, &large}) {
      std::vector<double> jit;
      for (int i = 0; i < kJit; ++i) {
        TempDir tmp;
        fs::create_directories(tmp.path / "empty");
        kiln::LoaderConfig c =
            store_config((tmp.path / "empty").string(), (tmp.path / "cache").string());
        c.disable_jit = false;
        kiln::Loader l(c);
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
        if (r.name == "cold get (store: read, verify, load), " + a->uri) cold_med = r.s.median;
      rows.push_back({"NVRTC JIT cold, " + a->uri, "us", j,
                      "CUDA_CACHE_DISABLE=1, empty JIT cache dir each time; JIT/cold = " +
                          fmt(j.median / cold_med)});
    }

    // (e) fetch from an HTTP mirror on loopback: download + verify + unpack + load.
    if (!mirror.empty() && !index.empty()) {
      std::string pin = kiln::sha256_hex(read_all(index));
      std::vector<double> fetch;
      for (int i = 0; i < 5; ++i) {
        TempDir tmp;
        fs::create_directories(tmp.path / "empty");
        kiln::LoaderConfig c =
            store_config((tmp.path / "empty").string(), (tmp.path / "cache").string());
        c.offline = false;
        c.mirrors = {mirror};
        c.index_sha256 = pin;
        kiln::Loader l(c);
        auto t0 = Clock::now();
        const kiln::KernelHandle& h = l.get(small.uri);
        fetch.push_back(ns_since(t0) / 1e3);
        if (h.origin.find(tmp.path.string()) != 0) {
          std::fprintf(stderr, "fetch row: loaded from %s\n", h.origin.c_str());
          return 1;
        }
      }
      rows.push_back({"fetch from mirror (loopback HTTP) + verify + unpack + load, " + small.uri,
                      "us", stats(fetch), "whole sm_90 archive fetched; server: " + mirror});
    } else {
      rows.push_back({"fetch from mirror", "-", {}, "not measured: no --mirror/--index given"});
    }
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "kiln error (%s): %s\n", kiln::to_string(e.kind()), e.what());
    return kiln::exit_code(e.kind());
  }

  std::ostringstream md;
  md << "Device: " << prop.name << " (CC " << prop.major << "." << prop.minor
     << "); timing: host steady_clock around synchronous calls.\n\n";
  md << "| measurement | unit | median | min | max | count | notes |\n";
  md << "|---|---|---|---|---|---|---|\n";
  for (const auto& r : rows)
    md << "| " << r.name << " | " << r.unit << " | " << (r.s.count ? fmt(r.s.median) : "-") << " | "
       << (r.s.count ? fmt(r.s.min) : "-") << " | " << (r.s.count ? fmt(r.s.max) : "-") << " | "
       << r.s.count << " | " << r.note << " |\n";
  std::cout << md.str();
  if (!out.empty()) std::ofstream(out) << md.str();
  return 0;
}
