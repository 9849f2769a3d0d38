#pragma once
// The CUDA driver behind a small interface, so resolution, verification and the "load counts
// only when the kernel is there" rule are unit-tested with a fake. The real one dlopens
// libcuda.so.1 (never linked): libkiln and the kiln CLI run on machines without a driver, and
// "no driver" / "no device" become reported capabilities, not crashes.
// Handles are the driver's opaque pointers (CUcontext, CUlibrary, CUkernel, CUfunction,
// CUstream) as void*, so this header does not need cuda.h.
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::runtime {

// One kernel parameter as the driver reports it (cuKernelGetParamInfo): its byte offset in the
// parameter buffer and its size.
struct ParamInfo {
  std::size_t offset = 0, size = 0;
};

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc = 0;  // compute capability as 90 for 9.0
};

class Driver {
 public:
  virtual ~Driver() = default;
  // Opens and initialises the driver (once). Throws Error{Unsupported} naming libcuda.so.1
  // and the dlerror, or the cuInit error (e.g. CUDA_ERROR_NO_DEVICE).
  virtual void init() = 0;
  virtual int driver_version() = 0;  // cuDriverGetVersion, e.g. 13000
  virtual std::vector<DeviceInfo> devices() = 0;
  // The calling thread's current context; when there is none, device 0's primary context is
  // retained and made current (what the CUDA runtime does on first use).
  virtual void* current_context() = 0;
  virtual int current_device_cc() = 0;  // of the current context's device
  virtual bool stream_is_capturing(void* stream) = 0;
  // Errors below throw Error{Driver} naming the call and the driver's error name.
  virtual void* load_library(const std::string& image) = 0;  // cuLibraryLoadData
  virtual unsigned kernel_count(void* library) = 0;          // cuLibraryGetKernelCount
  virtual void* get_kernel(void* library, const std::string& symbol) = 0;
  virtual void* kernel_function(void* kernel) = 0;  // cuKernelGetFunction, current context
  virtual void unload_library(void* library) noexcept = 0;
  virtual void launch(void* function, const unsigned grid[3], const unsigned block[3],
                      unsigned shared_bytes, void* stream, void** args) = 0;

  // Below: calls a driver may lack. The defaults are what a driver that cannot answer gives;
  // the real driver answers them where libcuda has the entry points.

  // The parameters of a CUkernel from get_kernel, in order (cuKernelGetParamInfo, CUDA 12.4+):
  // nullopt when the driver cannot say (too old, or it answers CUDA_ERROR_NOT_SUPPORTED), so a
  // launch cannot be checked against them.
  virtual std::optional<std::vector<ParamInfo>> kernel_parameters(void* /*kernel*/) {
    return std::nullopt;
  }
  // The ordinal of the current context's device (cuCtxGetDevice); a driver of one device: 0.
  virtual int current_device() { return 0; }
  // Waits until `stream` (a CUstream) has done its work (cuStreamSynchronize); a driver that runs
  // nothing has nothing to wait for.
  virtual void synchronize(void* /*stream*/) {}
};

// Name of the driver library libkiln opens.
constexpr const char* kCudaDriverLibrary = "libcuda.so.1";

// The process-wide driver over dlopen("libcuda.so.1") (every call returns the same one); nothing
// is opened until init() or another call. Another library gets a driver of its own: tests pass
// the path of an absent library to get the real "no driver" behaviour on any machine.
std::shared_ptr<Driver> make_cuda_driver(std::string library = kCudaDriverLibrary);

}  // namespace kiln::runtime
