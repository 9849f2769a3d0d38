#pragma once
// A CUDA driver for a CC 9.0 device with no GPU behind it: every image handed to it is recorded
// and "loads". For integration tests that run the real loader tiers (mirrors over loopback)
// on machines without a GPU, and for the loader's launch checks: it reports the parameters of
// the kernels named in `parameters` (cuKernelGetParamInfo; a kernel it has no list for is one
// the driver "cannot say" about, as a driver older than CUDA 12.4) and records every launch.
#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/error.hpp"
#include "runtime/driver.hpp"

namespace kiln::test {

class Cc90Driver : public runtime::Driver {
 public:
  std::vector<std::string> images;  // every image load_library was given, in order
  // Parameter sizes by entry symbol ("*": any kernel without a list of its own); offsets follow,
  // each aligned to its size (as nvcc lays out scalars and pointers).
  std::map<std::string, std::vector<std::size_t>> parameters;
  struct Launch {
    std::string symbol;
    unsigned grid[3], block[3], shared_bytes;
    void* stream;
    std::vector<std::string> args;  // the bytes behind each argument pointer, at the size known
  };
  std::vector<Launch> launches;

  // What it reports (cuDriverGetVersion's number; the device's compute capability), and the
  // images it refuses as a real driver refuses code of a toolkit newer than itself
  // (CUDA_ERROR_UNSUPPORTED_PTX_VERSION); a test says which bytes are such code.
  int version = 13000;
  int cc = 90;
  std::vector<std::string> refused_images;

  void init() override {}
  int driver_version() override { return version; }
  std::vector<runtime::DeviceInfo> devices() override { return {{0, "stand-in", cc}}; }
  void* current_context() override { return this; }
  int current_device_cc() override { return cc; }
  bool stream_is_capturing(void*) override { return false; }
  void* load_library(const std::string& image) override {
    for (const auto& r : refused_images)
      if (r == image)
        throw Error(ErrorKind::Driver,
                    "cuLibraryLoadData failed: CUDA_ERROR_UNSUPPORTED_PTX_VERSION");
    images.push_back(image);
    return reinterpret_cast<void*>(images.size());
  }
  unsigned kernel_count(void*) override { return 1; }
  // A kernel is the index of its symbol in symbols_ plus one (never null).
  void* get_kernel(void*, const std::string& symbol) override {
    symbols_.push_back(symbol);
    return reinterpret_cast<void*>(symbols_.size());
  }
  void* kernel_function(void* k) override { return k; }
  void unload_library(void*) noexcept override {}
  std::optional<std::vector<runtime::ParamInfo>> kernel_parameters(void* kernel) override {
    auto it = find(symbol_of(kernel));
    if (it == parameters.end()) return std::nullopt;
    std::vector<runtime::ParamInfo> out;
    std::size_t offset = 0;
    for (std::size_t size : it->second) {
      offset = (offset + size - 1) / size * size;
      out.push_back({offset, size});
      offset += size;
    }
    return out;
  }
  void launch(void* function, const unsigned* grid, const unsigned* block, unsigned shared_bytes,
              void* stream, void** args) override {
    Launch l{symbol_of(function), {grid[0], grid[1], grid[2]}, {block[0], block[1], block[2]},
             shared_bytes, stream, {}};
    auto it = find(l.symbol);
    if (it != parameters.end())
      for (std::size_t i = 0; i < it->second.size(); ++i)
        l.args.emplace_back(static_cast<const char*>(args[i]), it->second[i]);
    launches.push_back(std::move(l));
  }

 private:
  std::map<std::string, std::vector<std::size_t>>::const_iterator find(const std::string& sym) const {
    auto it = parameters.find(sym);
    return it != parameters.end() ? it : parameters.find("*");
  }
  std::string symbol_of(void* kernel) const {
    auto i = reinterpret_cast<std::uintptr_t>(kernel);
    return i >= 1 && i <= symbols_.size() ? symbols_[i - 1] : std::string();
  }
  std::vector<std::string> symbols_;
};

// A stand-in driver reporting CUDA `version` (cuDriverGetVersion's number, 12080 for 12.8) on a
// device of compute capability `cc`.
inline std::shared_ptr<Cc90Driver> stand_in_driver(int version, int cc) {
  auto d = std::make_shared<Cc90Driver>();
  d->version = version;
  d->cc = cc;
  return d;
}

}  // namespace kiln::test
