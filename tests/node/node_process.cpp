// One process of a node (issue 26, item 4). tests/node/many_processes.sh starts many of these at
// once on one empty cache directory. Each makes a Loader of the reference package whose only
// source is one mirror (a pinned index or a TUF root), gets every URI from --threads threads at
// once, and checks that every image the driver was handed is, byte for byte, the artifact of that
// URI in the store the mirror tier filled (the cache directory). The driver is libcuda.so.1 as the
// dynamic loader finds it: the stand-in of bench/stand_in_libcuda.c on a machine without a GPU
// (LD_LIBRARY_PATH=<build>/bench/stand-in), the real one on a GPU machine; a recording layer
// between the loader and it keeps what it was handed.
//
//   kiln_node_process --cache DIR --mirror URL (--index-sha256 HEX | --tuf-root FILE)
//                     [--threads N] [--uri URI]...     (default URIs: every kernel of the package)
//
// Prints one JSON line {"pid", "threads", "gets", "errors", "images", "mismatches", "seconds",
// "first_error"}; exits 0 when every get succeeded and every image matched, 1 otherwise, 2 on a
// usage error.
#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "io/atomic_file.hpp"
#include "kiln/error.hpp"
#include "kiln/kernels.h"
#include "kiln/loader.hpp"
#include "loader_factory.hpp"
#include "plan/resolver.hpp"
#include "runtime/driver.hpp"
#include "store/store.hpp"

namespace {

using namespace kiln;

// Forwards to the real driver; keeps every image load_library was handed.
class RecordingDriver final : public runtime::Driver {
 public:
  explicit RecordingDriver(std::shared_ptr<runtime::Driver> d) : d_(std::move(d)) {}
  std::vector<std::string> images() {
    std::lock_guard<std::mutex> g(mu_);
    return images_;
  }
  void init() override { d_->init(); }
  int driver_version() override { return d_->driver_version(); }
  std::vector<runtime::DeviceInfo> devices() override { return d_->devices(); }
  void* current_context() override { return d_->current_context(); }
  int current_device_cc() override { return d_->current_device_cc(); }
  bool stream_is_capturing(void* s) override { return d_->stream_is_capturing(s); }
  void* load_library(const std::string& image) override {
    void* lib = d_->load_library(image);
    std::lock_guard<std::mutex> g(mu_);
    images_.push_back(image);
    return lib;
  }
  unsigned kernel_count(void* l) override { return d_->kernel_count(l); }
  void* get_kernel(void* l, const std::string& s) override { return d_->get_kernel(l, s); }
  void* kernel_function(void* k) override { return d_->kernel_function(k); }
  void unload_library(void* l) noexcept override { d_->unload_library(l); }
  void launch(void* f, const unsigned g[3], const unsigned b[3], unsigned shm, void* st,
              void** args) override {
    d_->launch(f, g, b, shm, st, args);
  }
  std::optional<std::vector<runtime::ParamInfo>> kernel_parameters(void* k) override {
    return d_->kernel_parameters(k);
  }
  int current_device() override { return d_->current_device(); }
  void synchronize(void* st) override { d_->synchronize(st); }

 private:
  std::shared_ptr<runtime::Driver> d_;
  std::mutex mu_;
  std::vector<std::string> images_;
};

// Device 0's primary context, made current on the calling thread (the loader loads into the
// current context, as in an application that called cudaSetDevice).
class PrimaryContext {
 public:
  PrimaryContext() {
    void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!lib) throw std::runtime_error(std::string("cannot load libcuda.so.1: ") + ::dlerror());
    auto init = reinterpret_cast<CUresult (*)(unsigned)>(::dlsym(lib, "cuInit"));
    auto get = reinterpret_cast<CUresult (*)(CUdevice*, int)>(::dlsym(lib, "cuDeviceGet"));
    auto retain = reinterpret_cast<CUresult (*)(CUcontext*, CUdevice)>(
        ::dlsym(lib, "cuDevicePrimaryCtxRetain"));
    set_ = reinterpret_cast<CUresult (*)(CUcontext)>(::dlsym(lib, "cuCtxSetCurrent"));
    CUdevice dev = 0;
    if (!init || !get || !retain || !set_ || init(0) != CUDA_SUCCESS ||
        get(&dev, 0) != CUDA_SUCCESS || retain(&ctx_, dev) != CUDA_SUCCESS)
      throw std::runtime_error("libcuda.so.1: no primary context on device 0");
  }
  void make_current() const {
    if (set_(ctx_) != CUDA_SUCCESS) throw std::runtime_error("cuCtxSetCurrent failed");
  }

 private:
  CUresult (*set_)(CUcontext) = nullptr;
  CUcontext ctx_ = nullptr;
};

struct Args {
  LoaderConfig cfg;
  int threads = 8;
  std::vector<std::string> uris;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "kiln_node_process: %s\nusage: kiln_node_process --cache DIR --mirror URL "
               "(--index-sha256 HEX | --tuf-root FILE) [--threads N] [--uri URI]...\n",
               why.c_str());
  std::exit(2);
}

Args parse_args(int argc, char** argv) {
  Args a;
  a.cfg.disable_jit = true;
  a.cfg.use_installed_store = false;
  a.cfg.log_level = "error";
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (i + 1 >= argc) usage(k + " needs a value");
    std::string v = argv[++i];
    if (k == "--cache")
      a.cfg.cache_dir = v;
    else if (k == "--mirror")
      a.cfg.mirrors.push_back(v);
    else if (k == "--index-sha256")
      a.cfg.index_sha256 = v;
    else if (k == "--tuf-root")
      a.cfg.tuf_root = v;
    else if (k == "--threads")
      a.threads = std::max(1, std::atoi(v.c_str()));
    else if (k == "--uri")
      a.uris.push_back(v);
    else
      usage("unknown option " + k);
  }
  if (a.cfg.cache_dir.empty() || a.cfg.mirrors.empty()) usage("--cache and --mirror are needed");
  if (a.uris.empty()) {
    const kiln_package& p = *kiln_kernels_package();
    for (std::size_t i = 0; i < p.kernel_count; ++i) a.uris.push_back(p.kernels[i].uri);
  }
  return a;
}

// uri -> the artifact's bytes, from every archive directory of the store the mirror tier filled.
std::map<std::string, std::set<std::string>> store_artifacts(const std::string& store) {
  std::map<std::string, std::set<std::string>> out;
  for (const store::StoreArchive& e : store::scan_store(store)) {
    if (!e.manifest) continue;
    for (const auto& a : e.manifest->artifacts)
      out[a.uri].insert(io::read_whole_file(e.dir + "/" + a.file, std::uint64_t{1} << 30));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Args args = parse_args(argc, argv);
  auto t0 = std::chrono::steady_clock::now();
  std::atomic<int> gets{0}, errors{0};
  std::mutex mu;
  std::string first_error;
  auto driver = std::make_shared<RecordingDriver>(runtime::make_cuda_driver());
  try {
    PrimaryContext ctx;
    plan::LoaderDeps deps;
    deps.driver = driver;
    std::unique_ptr<Loader> loader =
        make_loader(*kiln_kernels_package(), args.cfg, std::move(deps));
    std::vector<std::thread> pool;
    for (int t = 0; t < args.threads; ++t)
      pool.emplace_back([&, t] {
        ctx.make_current();
        // Each thread starts at another URI, so threads of one process race on each one.
        for (std::size_t i = 0; i < args.uris.size(); ++i) {
          const std::string& uri = args.uris[(i + t) % args.uris.size()];
          try {
            (void)loader->get(uri);
            ++gets;
          } catch (const std::exception& e) {
            ++errors;
            std::lock_guard<std::mutex> g(mu);
            if (first_error.empty()) first_error = uri + ": " + e.what();
          }
        }
      });
    for (auto& th : pool) th.join();
  } catch (const std::exception& e) {
    ++errors;
    first_error = e.what();
  }
  // Every image handed to the driver is the store's artifact of one of the URIs, and each URI
  // was loaded: the bytes a process runs are the bytes the store holds.
  int mismatches = 0;
  std::vector<std::string> images = driver->images();
  auto store = store_artifacts(args.cfg.cache_dir);
  std::set<std::string> matched;
  for (const std::string& img : images) {
    bool found = false;
    for (const auto& uri : args.uris)
      if (store.count(uri) && store[uri].count(img)) {
        matched.insert(uri);
        found = true;
      }
    if (!found) ++mismatches;
  }
  if (errors == 0 &&
      matched.size() != std::set<std::string>(args.uris.begin(), args.uris.end()).size())
    ++mismatches;  // a URI got without its image reaching the driver
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json line = {{"pid", static_cast<long>(::getpid())},
                         {"threads", args.threads},
                         {"gets", gets.load()},
                         {"errors", errors.load()},
                         {"images", images.size()},
                         {"mismatches", mismatches},
                         {"seconds", secs},
                         {"first_error", first_error}};
  std::printf("%s\n", line.dump().c_str());
  return errors == 0 && mismatches == 0 ? 0 : 1;
}
