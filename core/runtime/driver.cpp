#include "runtime/driver.hpp"

#include <cuda.h>
#include <dlfcn.h>

#include <array>
#include <atomic>
#include <mutex>
#include <utility>

#include "kiln/error.hpp"

namespace kiln::runtime {

namespace {

// Symbol names as exported by libcuda: cuda.h maps some API names to versioned ones by macro
// (cuDevicePrimaryCtxRelease -> _v2); cuLaunchKernel / cuStreamIsCapturing are the legacy
// default-stream exports (the _ptsz variants exist only for per-thread default streams).
struct CudaApi {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuGetErrorName)(CUresult, const char**);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, CUdevice_attribute, CUdevice);
  CUresult (*cuCtxGetCurrent)(CUcontext*);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxGetDevice)(CUdevice*);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
  CUresult (*cuLibraryLoadData)(CUlibrary*, const void*, CUjit_option*, void**, unsigned,
                                CUlibraryOption*, void**, unsigned);
  CUresult (*cuLibraryUnload)(CUlibrary);
  CUresult (*cuLibraryGetKernel)(CUkernel*, CUlibrary, const char*);
  CUresult (*cuLibraryGetKernelCount)(unsigned*, CUlibrary);
  CUresult (*cuKernelGetFunction)(CUfunction*, CUkernel);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**);
  CUresult (*cuStreamIsCapturing)(CUstream, CUstreamCaptureStatus*);
  CUresult (*cuStreamSynchronize)(CUstream);
  // Optional: CUDA 12.4+ drivers only; null when libcuda lacks it (launches go unchecked).
  CUresult (*cuKernelGetParamInfo)(CUkernel, size_t, size_t*, size_t*);
};

class CudaDriver : public Driver {
 public:
  explicit CudaDriver(std::string library) : library_(std::move(library)) {}
  ~CudaDriver() override {
    if (primary_retained_) api_.cuDevicePrimaryCtxRelease(primary_device_);
    // The handle stays open: kernels loaded through it may outlive this object in the process.
  }

  void init() override {
    if (ready_.load(std::memory_order_acquire)) return;
    std::call_once(once_, [this] { open(); });
    if (!init_error_.empty()) throw Error(ErrorKind::Unsupported, init_error_);
  }

  // Asked of the driver once per driver object (make_cuda_driver gives the process one): the
  // version cannot change while the library is loaded.
  int driver_version() override {
    int v = version_cache_.load(std::memory_order_acquire);
    if (v != 0) return v;
    init();
    check(api_.cuDriverGetVersion(&v), "cuDriverGetVersion");
    version_cache_.store(v, std::memory_order_release);
    return v;
  }

  std::vector<DeviceInfo> devices() override {
    init();
    int n = 0;
    check(api_.cuDeviceGetCount(&n), "cuDeviceGetCount");
    std::vector<DeviceInfo> out;
    for (int i = 0; i < n; ++i) {
      CUdevice d;
      check(api_.cuDeviceGet(&d, i), "cuDeviceGet");
      char name[256] = {};
      check(api_.cuDeviceGetName(name, sizeof(name) - 1, d), "cuDeviceGetName");
      out.push_back({i, name, cc_of(d)});
    }
    return out;
  }

  void* current_context() override {
    init();
    CUcontext ctx = nullptr;
    check(api_.cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
    if (ctx) return ctx;
    std::lock_guard<std::mutex> lock(mu_);
    if (!primary_retained_) {
      int n = 0;
      check(api_.cuDeviceGetCount(&n), "cuDeviceGetCount");
      if (n == 0)
        throw Error(ErrorKind::Unsupported, "no CUDA device: the driver reports 0 devices");
      check(api_.cuDeviceGet(&primary_device_, 0), "cuDeviceGet");
      check(api_.cuDevicePrimaryCtxRetain(&primary_, primary_device_), "cuDevicePrimaryCtxRetain");
      primary_retained_ = true;
    }
    check(api_.cuCtxSetCurrent(primary_), "cuCtxSetCurrent");
    return primary_;
  }

  int current_device_cc() override {
    current_context();
    CUdevice d;
    check(api_.cuCtxGetDevice(&d), "cuCtxGetDevice");
    return cc_of(d);
  }

  bool stream_is_capturing(void* stream) override {
    init();
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    check(api_.cuStreamIsCapturing(static_cast<CUstream>(stream), &st), "cuStreamIsCapturing");
    return st != CU_STREAM_CAPTURE_STATUS_NONE;
  }

  void* load_library(const std::string& image) override {
    init();
    CUlibrary lib = nullptr;
    check(api_.cuLibraryLoadData(&lib, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
          "cuLibraryLoadData");
    return lib;
  }

  unsigned kernel_count(void* library) override {
    unsigned n = 0;
    check(api_.cuLibraryGetKernelCount(&n, static_cast<CUlibrary>(library)),
          "cuLibraryGetKernelCount");
    return n;
  }

  void* get_kernel(void* library, const std::string& symbol) override {
    CUkernel k = nullptr;
    check(api_.cuLibraryGetKernel(&k, static_cast<CUlibrary>(library), symbol.c_str()),
          "cuLibraryGetKernel(" + symbol + ")");
    return k;
  }

  void* kernel_function(void* kernel) override {
    CUfunction f = nullptr;
    check(api_.cuKernelGetFunction(&f, static_cast<CUkernel>(kernel)), "cuKernelGetFunction");
    return f;
  }

  std::optional<std::vector<ParamInfo>> kernel_parameters(void* kernel) override {
    init();
    if (!api_.cuKernelGetParamInfo) return std::nullopt;
    // The driver answers CUDA_ERROR_INVALID_VALUE for the index past the last parameter.
    std::vector<ParamInfo> out;
    for (std::size_t i = 0;; ++i) {
      std::size_t offset = 0, size = 0;
      CUresult r = api_.cuKernelGetParamInfo(static_cast<CUkernel>(kernel), i, &offset, &size);
      if (r == CUDA_ERROR_INVALID_VALUE) return out;
      if (r == CUDA_ERROR_NOT_SUPPORTED) return std::nullopt;
      check(r, "cuKernelGetParamInfo");
      out.push_back({offset, size});
    }
  }

  int current_device() override {
    current_context();
    CUdevice d;
    check(api_.cuCtxGetDevice(&d), "cuCtxGetDevice");
    return static_cast<int>(d);
  }

  void synchronize(void* stream) override {
    init();
    check(api_.cuStreamSynchronize(static_cast<CUstream>(stream)), "cuStreamSynchronize");
  }

  void unload_library(void* library) noexcept override {
    if (library) api_.cuLibraryUnload(static_cast<CUlibrary>(library));
  }

  void launch(void* function, const unsigned grid[3], const unsigned block[3],
              unsigned shared_bytes, void* stream, void** args) override {
    check(api_.cuLaunchKernel(static_cast<CUfunction>(function), grid[0], grid[1], grid[2],
                              block[0], block[1], block[2], shared_bytes,
                              static_cast<CUstream>(stream), args, nullptr),
          "cuLaunchKernel");
  }

 private:
  template <typename F>
  bool sym(F& fn, const char* name) {
    fn = reinterpret_cast<F>(::dlsym(handle_, name));
    if (!fn)
      init_error_ = library_ + " lacks " + name + " (driver too old for CUDA 12+ library loading?)";
    return fn != nullptr;
  }

  void open() {
    handle_ = ::dlopen(library_.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) {
      const char* err = ::dlerror();
      init_error_ =
          "no CUDA driver: dlopen(" + library_ + ") failed: " + (err ? err : "unknown error");
      return;
    }
    bool ok = sym(api_.cuInit, "cuInit") && sym(api_.cuDriverGetVersion, "cuDriverGetVersion") &&
              sym(api_.cuGetErrorName, "cuGetErrorName") &&
              sym(api_.cuDeviceGetCount, "cuDeviceGetCount") &&
              sym(api_.cuDeviceGet, "cuDeviceGet") &&
              sym(api_.cuDeviceGetName, "cuDeviceGetName") &&
              sym(api_.cuDeviceGetAttribute, "cuDeviceGetAttribute") &&
              sym(api_.cuCtxGetCurrent, "cuCtxGetCurrent") &&
              sym(api_.cuCtxSetCurrent, "cuCtxSetCurrent") &&
              sym(api_.cuCtxGetDevice, "cuCtxGetDevice") &&
              sym(api_.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain") &&
              sym(api_.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2") &&
              sym(api_.cuLibraryLoadData, "cuLibraryLoadData") &&
              sym(api_.cuLibraryUnload, "cuLibraryUnload") &&
              sym(api_.cuLibraryGetKernel, "cuLibraryGetKernel") &&
              sym(api_.cuLibraryGetKernelCount, "cuLibraryGetKernelCount") &&
              sym(api_.cuKernelGetFunction, "cuKernelGetFunction") &&
              sym(api_.cuLaunchKernel, "cuLaunchKernel") &&
              sym(api_.cuStreamIsCapturing, "cuStreamIsCapturing") &&
              sym(api_.cuStreamSynchronize, "cuStreamSynchronize");
    if (!ok) return;
    // Absent before CUDA 12.4: launches are then not checked against the kernel's parameters.
    api_.cuKernelGetParamInfo =
        reinterpret_cast<decltype(api_.cuKernelGetParamInfo)>(::dlsym(handle_, "cuKernelGetParamInfo"));
    CUresult r = api_.cuInit(0);
    if (r != CUDA_SUCCESS) {
      init_error_ = "the CUDA driver (" + library_ + ") is present but cuInit failed: " + name(r) +
                    (r == CUDA_ERROR_NO_DEVICE ? " (no CUDA device)" : "");
      return;
    }
    ready_.store(true, std::memory_order_release);
  }

  std::string name(CUresult r) const {
    const char* s = nullptr;
    if (api_.cuGetErrorName && api_.cuGetErrorName(r, &s) == CUDA_SUCCESS && s)
      return std::string(s) + " (" + std::to_string(static_cast<int>(r)) + ")";
    return "CUresult " + std::to_string(static_cast<int>(r));
  }

  void check(CUresult r, const std::string& call) const {
    if (r != CUDA_SUCCESS) throw Error(ErrorKind::Driver, call + " failed: " + name(r));
  }

  int cc_of(CUdevice d) {
    // A device's compute capability never changes: asked once per device, not per cold get.
    bool cacheable = d >= 0 && static_cast<std::size_t>(d) < cc_cache_.size();
    if (cacheable)
      if (int known = cc_cache_[static_cast<std::size_t>(d)].load(std::memory_order_relaxed))
        return known;
    int major = 0, minor = 0;
    check(api_.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d),
          "cuDeviceGetAttribute");
    check(api_.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d),
          "cuDeviceGetAttribute");
    int cc = major * 10 + minor;
    if (cacheable) cc_cache_[static_cast<std::size_t>(d)].store(cc, std::memory_order_relaxed);
    return cc;
  }

  const std::string library_;
  std::once_flag once_;
  std::atomic<bool> ready_{false};
  std::string init_error_;
  void* handle_ = nullptr;
  CudaApi api_{};
  std::mutex mu_;
  bool primary_retained_ = false;
  CUdevice primary_device_ = 0;
  CUcontext primary_ = nullptr;
  std::array<std::atomic<int>, 64> cc_cache_{};  // by CUdevice; 0 = not asked yet
  std::atomic<int> version_cache_{0};            // cuDriverGetVersion; 0 = not asked yet
};

}  // namespace

std::shared_ptr<Driver> make_cuda_driver(std::string library) {
  if (library != kCudaDriverLibrary) return std::make_shared<CudaDriver>(std::move(library));
  // One per process: libcuda is opened, its entry points resolved, cuInit called and device 0's
  // primary context retained once, however many Loaders come and go. Never destroyed: kernels
  // loaded through it may outlive every Loader, and releasing the primary context during static
  // destruction could race libcuda's own teardown. Another library (tests) gets its own.
  static const auto* shared =
      new std::shared_ptr<Driver>(std::make_shared<CudaDriver>(std::string(kCudaDriverLibrary)));
  return *shared;
}

}  // namespace kiln::runtime
