// kiln_cold_start: the first verified kernel result from a fresh process, through libkiln and
// through bare code (the floor), in the same program (docs/performance.md).
//
// The parent re-executes itself --runs times per mode, alternating floor and kiln, and times
// each child from just before posix_spawn (CLOCK_MONOTONIC, which steady_clock reads, shared by
// every process) to its verified result. Both children are this binary, which links neither
// libkiln, libcrypto nor libcuda: every library either mode needs is dlopen'ed from main(), so
// the two differ only in what they do there. Each child prints its phases on one line:
//   start_to_main  posix_spawn to main(): exec, dynamic linking, static initialisers
//   dlopen         floor: dlopen(libcrypto.so.3) + dlsym; kiln: dlopen(libkiln.so) and
//                  dlopen(libkiln-kernels.so, the reference package) + dlsym
//   driver         dlopen(libcuda.so.1) + cuInit + device 0's primary context made current
//                  (the same code in both modes)
//   first_result   floor: read + SHA-256 (OpenSSL) + compare with the manifest's digest +
//                  cuLibraryLoadData + cuLibraryGetKernel + cuKernelGetFunction + launch;
//                  kiln: kiln_loader_create + kiln_get + kiln_launch; then, in both, the result
//                  copied back and checked
//   total          posix_spawn to the checked result
//   first_result_faults  the minor page faults (getrusage) of first_result: a count, not a time
// With --no-gpu nothing touches a GPU: the children find the stand-in libcuda.so.1 first
// (bench/stand_in_libcuda.c, in --stand-in DIR, default `stand-in` beside this binary), which
// accepts every image and launches nothing, so both modes walk their whole path (the floor's
// load and launch, kiln's create + get + launch) and only the driver's own work is missing;
// the result is not checked (nothing computed it).
//
// The kiln children share one cache directory (<tmp>/kiln-cold-start-cache), so the unmeasured
// first kiln child keeps the store's scan record there (core/store/scan_record.hpp) and every
// measured one uses it: the measure is of a process after the first since the install. A store
// changed less than a second before is not recorded (scripts/bench_cold.sh waits for it).
// --cpu N runs the parent and every child on CPU N only (sched_setaffinity, inherited), so that
// where the scheduler puts a child cannot differ between the modes. (On the H200 machine it did
// not narrow the spread: a process there is fast or ~0.5 ms slow at random, pinned or not.)
//
// Usage: kiln_cold_start --libkiln PATH --store DIR [--uri URI] [--runs N] [--cpu N]
//                        [--out FILE] [--json FILE] [--no-gpu [--cc CC] [--stand-in DIR]]
#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/kernels.h"
#include "kiln/kiln.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;

std::int64_t now_ns() {
  struct timespec ts {};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "kiln_cold_start: %s\n", msg.c_str());
  std::exit(1);
}

void* must_sym(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  if (!p) die(std::string("dlsym ") + name + " failed");
  return p;
}

std::string read_file(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) die("cannot open " + path);
  struct stat st {};
  fstat(fd, &st);
  std::string out(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t used = 0;
  while (used < out.size()) {
    ssize_t n = read(fd, out.data() + used, out.size() - used);
    if (n <= 0) die("cannot read " + path);
    used += static_cast<std::size_t>(n);
  }
  close(fd);
  return out;
}

// What the floor needs to know in advance, as an application with a pinned digest would.
struct Artifact {
  std::string path, sha256, symbol;
};

// The driver calls both modes make, resolved from libcuda by name.
struct Cuda {
  CUresult (*init)(unsigned);
  CUresult (*device_get)(CUdevice*, int);
  CUresult (*attr)(int*, CUdevice_attribute, CUdevice);
  CUresult (*retain)(CUcontext*, CUdevice);
  CUresult (*set_current)(CUcontext);
  CUresult (*mem_alloc)(CUdeviceptr*, size_t);
  CUresult (*htod)(CUdeviceptr, const void*, size_t);
  CUresult (*dtoh)(void*, CUdeviceptr, size_t);
  CUresult (*lib_load)(CUlibrary*, const void*, CUjit_option*, void**, unsigned, CUlibraryOption*,
                       void**, unsigned);
  CUresult (*lib_kernel)(CUkernel*, CUlibrary, const char*);
  CUresult (*kernel_fn)(CUfunction*, CUkernel);
  CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                     unsigned, CUstream, void**, void**);
  CUresult (*sync)();
};

void cu_ok(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) die(std::string(what) + " failed: CUresult " + std::to_string(r));
}

template <typename F>
void bind(void* lib, F& f, const char* name) {
  f = reinterpret_cast<F>(must_sym(lib, name));
}

// cc given: only the device's compute capability is asked (no context: the parent must not
// hold one while its children run, in case the GPU is in an exclusive compute mode).
Cuda open_cuda(int* cc) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) die(std::string("dlopen libcuda.so.1: ") + dlerror());
  Cuda c{};
  bind(lib, c.init, "cuInit");
  bind(lib, c.device_get, "cuDeviceGet");
  bind(lib, c.attr, "cuDeviceGetAttribute");
  bind(lib, c.retain, "cuDevicePrimaryCtxRetain");
  bind(lib, c.set_current, "cuCtxSetCurrent");
  bind(lib, c.mem_alloc, "cuMemAlloc_v2");
  bind(lib, c.htod, "cuMemcpyHtoD_v2");
  bind(lib, c.dtoh, "cuMemcpyDtoH_v2");
  bind(lib, c.lib_load, "cuLibraryLoadData");
  bind(lib, c.lib_kernel, "cuLibraryGetKernel");
  bind(lib, c.kernel_fn, "cuKernelGetFunction");
  bind(lib, c.launch, "cuLaunchKernel");
  bind(lib, c.sync, "cuCtxSynchronize");
  cu_ok(c.init(0), "cuInit");
  CUdevice dev = 0;
  cu_ok(c.device_get(&dev, 0), "cuDeviceGet");
  if (cc) {
    int major = 0, minor = 0;
    cu_ok(c.attr(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
          "cuDeviceGetAttribute");
    cu_ok(c.attr(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
          "cuDeviceGetAttribute");
    *cc = major * 10 + minor;
    return c;
  }
  CUcontext ctx = nullptr;
  cu_ok(c.retain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  cu_ok(c.set_current(ctx), "cuCtxSetCurrent");
  return c;
}

// axpy on kN floats: y = 2 x + y, device buffers ready; returns the kernel arguments' owner.
constexpr long long kN = 4096;
struct AxpyBuffers {
  CUdeviceptr x = 0, y = 0;
  long long n = kN;
  float alpha = 2.0f;
  void* args[4] = {&n, &alpha, &x, &y};
};

void axpy_prepare(const Cuda& c, AxpyBuffers& b) {
  std::vector<float> x(kN), y(kN);
  for (long long i = 0; i < kN; ++i) x[i] = static_cast<float>(i), y[i] = 1.0f;
  cu_ok(c.mem_alloc(&b.x, kN * sizeof(float)), "cuMemAlloc");
  cu_ok(c.mem_alloc(&b.y, kN * sizeof(float)), "cuMemAlloc");
  cu_ok(c.htod(b.x, x.data(), kN * sizeof(float)), "cuMemcpyHtoD");
  cu_ok(c.htod(b.y, y.data(), kN * sizeof(float)), "cuMemcpyHtoD");
}

void axpy_check(const Cuda& c, const AxpyBuffers& b) {
  cu_ok(c.sync(), "cuCtxSynchronize");
  std::vector<float> y(kN);
  cu_ok(c.dtoh(y.data(), b.y, kN * sizeof(float)), "cuMemcpyDtoH");
  for (long long i = 0; i < kN; ++i)
    if (y[i] != 2.0f * static_cast<float>(i) + 1.0f)
      die("wrong result at " + std::to_string(i) + ": " + std::to_string(y[i]));
}

std::string hex(const unsigned char* md, unsigned n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (unsigned i = 0; i < n; ++i) s += d[md[i] >> 4], s += d[md[i] & 15];
  return s;
}

// One child: the phases, in ns, as "name=value ..." on stdout.
int child(const std::string& mode, std::int64_t t0, const std::map<std::string, std::string>& o) {
  std::int64_t t_main = now_ns();
  bool no_gpu = o.count("no-gpu") != 0;
  std::vector<std::pair<std::string, std::int64_t>> ph;
  ph.emplace_back("start_to_main", t_main - t0);
  std::int64_t t = t_main;
  // Minor page faults of the process (getrusage), for first_result_faults: in a fresh process
  // every first touch of a page of code or data is one, and they are much of what kiln pays.
  auto faults = [] {
    struct rusage ru {};
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<std::int64_t>(ru.ru_minflt + ru.ru_majflt);
  };
  std::int64_t faults_at = 0;
  auto mark = [&](const char* name) {
    std::int64_t n = now_ns();
    ph.emplace_back(name, n - t);
    t = n;
    if (std::strcmp(name, "driver") == 0) faults_at = faults();
    if (std::strcmp(name, "first_result") == 0)
      ph.emplace_back("first_result_faults", faults() - faults_at);
  };
  if (mode == "floor") {
    void* crypto = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!crypto) die(std::string("dlopen libcrypto.so.3: ") + dlerror());
    using Md = const void* (*)();
    using Digest = int (*)(const void*, size_t, unsigned char*, unsigned*, const void*, void*);
    auto sha256 = reinterpret_cast<Md>(must_sym(crypto, "EVP_sha256"));
    auto digest = reinterpret_cast<Digest>(must_sym(crypto, "EVP_Digest"));
    mark("dlopen");
    Cuda c = open_cuda(nullptr);  // the stand-in with --no-gpu
    AxpyBuffers b;
    axpy_prepare(c, b);
    mark("driver");
    std::string bytes = read_file(o.at("artifact"));
    unsigned char md[64];
    unsigned n = 0;
    if (digest(bytes.data(), bytes.size(), md, &n, sha256(), nullptr) != 1) die("EVP_Digest");
    if (hex(md, n) != o.at("sha256")) die("floor: digest mismatch for " + o.at("artifact"));
    {
      CUlibrary lib = nullptr;
      CUkernel k = nullptr;
      CUfunction f = nullptr;
      cu_ok(c.lib_load(&lib, bytes.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
            "cuLibraryLoadData");
      cu_ok(c.lib_kernel(&k, lib, o.at("symbol").c_str()), "cuLibraryGetKernel");
      cu_ok(c.kernel_fn(&f, k), "cuKernelGetFunction");
      cu_ok(c.launch(f, 16, 1, 1, 256, 1, 1, 0, nullptr, b.args, nullptr), "cuLaunchKernel");
      if (!no_gpu) axpy_check(c, b);
    }
    mark("first_result");
  } else {
    void* kiln = dlopen(o.at("libkiln").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!kiln) die("dlopen " + o.at("libkiln") + ": " + dlerror());
    auto config_init =
        reinterpret_cast<decltype(&kiln_config_init)>(must_sym(kiln, "kiln_config_init"));
    auto create =
        reinterpret_cast<decltype(&kiln_loader_create)>(must_sym(kiln, "kiln_loader_create"));
    auto get = reinterpret_cast<decltype(&kiln_get)>(must_sym(kiln, "kiln_get"));
    auto launch = reinterpret_cast<decltype(&kiln_launch)>(must_sym(kiln, "kiln_launch"));
    auto last_error =
        reinterpret_cast<decltype(&kiln_last_error)>(must_sym(kiln, "kiln_last_error"));
    // The reference package's description lives in libkiln-kernels, beside libkiln: an
    // application of kiln's own kernels opens both.
    std::string kernels_lib =
        (fs::path(o.at("libkiln")).parent_path() / "libkiln-kernels.so").string();
    void* kernels = dlopen(kernels_lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!kernels) die("dlopen " + kernels_lib + ": " + dlerror());
    auto package = reinterpret_cast<decltype(&kiln_kernels_package)>(
        must_sym(kernels, "kiln_kernels_package"));
    mark("dlopen");
    Cuda c = open_cuda(nullptr);  // the stand-in with --no-gpu
    AxpyBuffers b;
    axpy_prepare(c, b);
    mark("driver");
    kiln_config cfg;
    config_init(&cfg);
    cfg.artifact_path = o.at("store").c_str();
    cfg.cache_dir = o.at("cache").c_str();
    cfg.offline = 1;
    cfg.disable_jit = 1;
    cfg.log_level = "error";
    kiln_loader* loader = nullptr;
    if (create(package(), &cfg, &loader) != KILN_OK)
      die(std::string("kiln_loader_create: ") + last_error());
    {
      kiln_kernel* k = nullptr;
      if (get(loader, o.at("uri").c_str(), &k) != KILN_OK)
        die(std::string("kiln_get: ") + last_error());
      const unsigned grid[3] = {16, 1, 1}, block[3] = {256, 1, 1};
      if (launch(loader, k, 0, grid, block, 0, nullptr, b.args) != KILN_OK)
        die(std::string("kiln_launch: ") + last_error());
      if (!no_gpu) axpy_check(c, b);
    }
    mark("first_result");
  }
  ph.emplace_back("total", t - t0);
  // Times in ns; first_result_faults is a count.
  for (std::size_t i = 0; i < ph.size(); ++i)
    std::printf("%s%s=%lld", i ? " " : "", ph[i].first.c_str(),
                static_cast<long long>(ph[i].second));
  std::printf("\n");
  return 0;
}

// The children's environment: this process's, unless --no-gpu puts the stand-in driver first
// (child_env points into child_env_strings).
std::vector<std::string> child_env_strings;
std::vector<char*> child_env;

void use_stand_in_driver(const std::string& dir, int cc) {
  std::string path = dir;
  for (char** e = environ; *e; ++e) {
    if (std::strncmp(*e, "LD_LIBRARY_PATH=", 16) == 0) {
      if ((*e)[16]) path += std::string(":") + (*e + 16);
      continue;
    }
    if (std::strncmp(*e, "KILN_STAND_IN_CC=", 17) == 0) continue;
    child_env_strings.emplace_back(*e);
  }
  child_env_strings.push_back("LD_LIBRARY_PATH=" + path);
  child_env_strings.push_back("KILN_STAND_IN_CC=" + std::to_string(cc));
  for (auto& e : child_env_strings) child_env.push_back(e.data());
  child_env.push_back(nullptr);
}

// Runs one child and returns its phases (ns).
std::map<std::string, double> run_child(const std::string& self, const std::string& mode,
                                        std::vector<std::string> args) {
  int fds[2];
  if (pipe(fds) != 0) die("pipe failed");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  std::int64_t t0 = now_ns();
  args.insert(args.begin(), {self, "--child", mode, "--t0", std::to_string(t0)});
  // t0 is taken before the argument vector is built: a little of the parent's work counts.
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, self.c_str(), &fa, nullptr, argv.data(),
                  child_env.empty() ? environ : child_env.data()) != 0)
    die("posix_spawn failed");
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  std::string line;
  char buf[512];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) line.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) die(mode + " child failed (see above)");
  std::map<std::string, double> out;
  std::istringstream in(line);
  std::string kv;
  while (in >> kv) {
    auto eq = kv.find('=');
    if (eq != std::string::npos) out[kv.substr(0, eq)] = std::atof(kv.c_str() + eq + 1);
  }
  return out;
}

struct Stats {
  double median = 0, min = 0, max = 0, p10 = 0;
};
Stats stats(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.median = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  s.p10 = v[(v.size() - 1) / 10];  // the 10th percentile, nearest rank below
  return s;
}

std::string fmt(double v) {
  char b[64];
  std::snprintf(b, sizeof b, v >= 100 ? "%.0f" : v >= 10 ? "%.1f" : "%.3f", v);
  return b;
}

// The artifact of `uri` in the archive the loader would pick on CC cc: the exact arch-specific
// SASS (sm_XYa), else the exact SASS (sm_XY); the floor reads and pins the same file.
Artifact find_artifact(const std::string& store, const std::string& uri, int cc) {
  std::string want[] = {"-sm_" + std::to_string(cc) + "a", "-sm_" + std::to_string(cc)};
  for (const auto& suffix : want) {
    for (const auto& d : fs::directory_iterator(store)) {
      std::string name = d.path().filename().string();
      if (name.size() < suffix.size() ||
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
        continue;
      auto m = nlohmann::json::parse(read_file((d.path() / "manifest.json").string()));
      for (const auto& a : m.at("artifacts"))
        if (a.at("uri") == uri)
          return {(d.path() / a.at("file").get<std::string>()).string(),
                  a.at("sha256").get<std::string>(),
                  a.at("entries").at(0).at("symbol").get<std::string>()};
    }
  }
  die("no sm_" + std::to_string(cc) + "a or sm_" + std::to_string(cc) + " archive with " + uri +
      " in " + store);
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> o;
  std::string mode;
  std::int64_t t0 = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--no-gpu") {
      o["no-gpu"] = "1";
      continue;
    }
    if (a.rfind("--", 0) != 0 || i + 1 >= argc) die("bad argument " + a + " (see the header)");
    std::string v = argv[++i];
    if (a == "--child")
      mode = v;
    else if (a == "--t0")
      t0 = std::atoll(v.c_str());
    else
      o[a.substr(2)] = v;
  }
  if (!mode.empty()) return child(mode, t0, o);

  if (!o.count("libkiln") || !o.count("store"))
    die("usage: kiln_cold_start --libkiln PATH --store DIR [--uri URI] [--runs N] [--cpu N] "
        "[--out FILE] [--json FILE] [--no-gpu [--cc CC] [--stand-in DIR]]");
  int cpu = o.count("cpu") ? std::atoi(o["cpu"].c_str()) : -1;
  if (cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
      die("--cpu " + std::to_string(cpu) + ": sched_setaffinity failed: " + std::strerror(errno));
  }
  bool no_gpu = o.count("no-gpu") != 0;
  std::string uri = o.count("uri") ? o["uri"] : "axpy_dtype_f32";
  int runs = o.count("runs") ? std::max(1, std::atoi(o["runs"].c_str())) : 7;
  int cc = o.count("cc") ? std::atoi(o["cc"].c_str()) : 90;
  if (!no_gpu) open_cuda(&cc);  // the device's CC picks the archive (the parent only)
  Artifact art = find_artifact(o["store"], uri, cc);
  std::string self = fs::canonical("/proc/self/exe").string();
  if (no_gpu) {
    std::string dir = o.count("stand-in") ? o["stand-in"]
                                          : (fs::path(self).parent_path() / "stand-in").string();
    if (!fs::exists(fs::path(dir) / "libcuda.so.1"))
      die("--no-gpu needs the stand-in driver: no libcuda.so.1 in " + dir +
          " (built with -DKILN_BUILD_BENCH=ON; --stand-in DIR)");
    use_stand_in_driver(fs::absolute(dir).string(), cc);
  }
  std::string cache = (fs::temp_directory_path() / "kiln-cold-start-cache").string();
  fs::create_directories(cache);
  std::vector<std::string> args = {"--libkiln",  fs::absolute(o["libkiln"]).string(),
                                   "--store",    fs::absolute(o["store"]).string(),
                                   "--cache",    cache,
                                   "--uri",      uri,
                                   "--artifact", art.path,
                                   "--sha256",   art.sha256,
                                   "--symbol",   art.symbol};
  if (no_gpu) args.push_back("--no-gpu");
  const std::vector<std::string> phases = {"start_to_main", "dlopen", "driver", "first_result",
                                           "total"};
  // mode -> phase -> us (first_result_faults: a count)
  std::map<std::string, std::map<std::string, std::vector<double>>> us;
  // One unmeasured round first (page cache, the dynamic loader's cache), then alternating.
  run_child(self, "floor", args);
  run_child(self, "kiln", args);
  for (int i = 0; i < runs; ++i)
    for (const char* m : {"floor", "kiln"})
      for (const auto& [k, v] : run_child(self, m, args))
        us[m][k].push_back(k == "first_result_faults" ? v : v / 1e3);

  std::ostringstream md;
  md << "Fresh process, " << runs << " runs per mode, alternating; " << uri << " from " << art.path
     << (no_gpu ? "; --no-gpu (the stand-in driver: nothing is loaded or launched for real, "
                  "the result is not checked)"
                : "")
     << (cpu >= 0 ? "; every process on CPU " + std::to_string(cpu) : std::string())
     << ".\n\n| mode | phase | unit | median | min | max |\n|---|---|---|---|---|---|\n";
  for (const char* m : {"floor", "kiln"})
    for (const auto& p : phases) {
      Stats s = stats(us[m][p]);
      md << "| " << m << " | " << p << " | us | " << fmt(s.median) << " | " << fmt(s.min) << " | "
         << fmt(s.max) << " |\n";
    }
  for (const char* m : {"floor", "kiln"}) {
    Stats s = stats(us[m]["first_result_faults"]);
    md << "| " << m << " | first_result page faults | count | " << fmt(s.median) << " | "
       << fmt(s.min) << " | " << fmt(s.max) << " |\n";
  }
  double ratio = stats(us["kiln"]["total"]).median / stats(us["floor"]["total"]).median;
  double first =
      stats(us["kiln"]["first_result"]).median / stats(us["floor"]["first_result"]).median;
  double dl = stats(us["kiln"]["dlopen"]).median / stats(us["floor"]["dlopen"]).median;
  // On the H200 machine a process's first_result falls near one of two values ~0.5 ms apart,
  // in either mode, at random (docs/performance.md, "The store scan kept between processes"):
  // a median then moves with how many processes of a run fell high. The 10th percentile reads
  // the low cluster in both modes, so it is printed beside the medians (not instead).
  double first_p10 =
      stats(us["kiln"]["first_result"]).p10 / stats(us["floor"]["first_result"]).p10;
  md << "\nkiln/floor, first_result (first verified result once the driver is up), medians: "
     << fmt(first) << (no_gpu ? "" : " (goal <= 1.2)")
     << "\nkiln/floor, first_result, 10th percentiles: " << fmt(first_p10)
     << "\nkiln/floor, total (spawn to checked result), medians: " << fmt(ratio)
     << "\ndlopen(libkiln)/dlopen(libcrypto), medians: " << fmt(dl) << " (goal <= 2)\n";
  std::cout << md.str();
  if (o.count("out")) std::ofstream(o["out"]) << md.str();
  if (o.count("json")) {
    nlohmann::json j;
    j["uri"] = uri;
    j["artifact"] = art.path;
    j["runs"] = runs;
    j["no_gpu"] = no_gpu;
    j["cpu"] = cpu;  // -1: not pinned
    for (const char* m : {"floor", "kiln"})
      for (const auto& p : phases) {
        Stats s = stats(us[m][p]);
        j["modes"][m][p] = {{"median_us", s.median},
                            {"min_us", s.min},
                            {"max_us", s.max},
                            {"samples_us", us[m][p]}};
      }
    for (const char* m : {"floor", "kiln"}) {
      Stats s = stats(us[m]["first_result_faults"]);
      j["modes"][m]["first_result_faults"] = {{"median", s.median},
                                              {"min", s.min},
                                              {"max", s.max},
                                              {"samples", us[m]["first_result_faults"]}};
    }
    j["ratio_first_result"] = first;
    j["ratio_first_result_p10"] = first_p10;
    j["ratio_total"] = ratio;
    j["ratio_dlopen"] = dl;
    std::ofstream(o["json"]) << j.dump(2) << "\n";
  }
  return 0;
}
