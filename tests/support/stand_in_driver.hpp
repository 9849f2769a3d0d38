#pragma once
// A CUDA driver for a CC 9.0 device with no GPU behind it: every image handed to it is recorded
// and "loads". For integration tests that run the real loader tiers (mirrors over loopback)
// on machines without a GPU.
#include <string>
#include <vector>

#include "runtime/driver.hpp"

namespace kiln::test {

class Cc90Driver : public runtime::Driver {
 public:
  std::vector<std::string> images;  // every image load_library was given, in order
  void init() override {}
  int driver_version() override { return 13000; }
  std::vector<runtime::DeviceInfo> devices() override { return {{0, "CC 9.0 stand-in", 90}}; }
  void* current_context() override { return this; }
  int current_device_cc() override { return 90; }
  bool stream_is_capturing(void*) override { return false; }
  void* load_library(const std::string& image) override {
    images.push_back(image);
    return reinterpret_cast<void*>(images.size());
  }
  unsigned kernel_count(void*) override { return 1; }
  void* get_kernel(void* lib, const std::string&) override { return lib; }
  void* kernel_function(void* k) override { return k; }
  void unload_library(void*) noexcept override {}
  void launch(void*, const unsigned*, const unsigned*, unsigned, void*, void**) override {}
};

}  // namespace kiln::test
