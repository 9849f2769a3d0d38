#pragma once
// verify_wheel and wheel_manifests read a wheel from a path named like a wheel, so the wheel
// targets write each input to one file in a private temp directory (under $TMPDIR; /dev/shm
// keeps it off the disk), removed at exit.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "kiln/version.hpp"
#include "wheel/wheel.hpp"

namespace kiln::fuzz {

class WheelFile {
 public:
  WheelFile() {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/kiln-fuzz-wheel-XXXXXX";
    if (!mkdtemp(tmpl.data())) std::abort();
    dir_ = tmpl;
    path_ = dir_ / wheel::wheel_file_name("kiln-kernels", version(), cuda_version(), "sm_80");
  }
  ~WheelFile() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  WheelFile(const WheelFile&) = delete;
  WheelFile& operator=(const WheelFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  void write(std::string_view bytes) const {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) std::abort();
  }

 private:
  std::filesystem::path dir_;
  std::filesystem::path path_;
};

inline const WheelFile& wheel_file() {
  static WheelFile f;
  return f;
}

}  // namespace kiln::fuzz
