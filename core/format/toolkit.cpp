#include "format/toolkit.hpp"

#include "kiln/error.hpp"

namespace kiln::format {

namespace {

std::optional<int> small_number(std::string_view s) {
  if (s.empty() || s.size() > 3) return std::nullopt;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

// The first toolkit of a major: what SASS of that major needs of a driver.
CudaVersion first_of_major(int major) { return {major, 0}; }

}  // namespace

std::string CudaVersion::str() const { return std::to_string(major) + "." + std::to_string(minor); }

std::optional<CudaVersion> parse_cuda_version(std::string_view text) {
  const auto dot = text.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  auto major = small_number(text.substr(0, dot));
  auto minor = small_number(text.substr(dot + 1));
  if (!major || !minor) return std::nullopt;
  return CudaVersion{*major, *minor};
}

int parse_driver_option(std::string_view text, std::string_view flag) {
  auto v = parse_cuda_version(text);
  if (!v || v->major == 0 || v->minor > 99)
    throw Error(ErrorKind::Usage, std::string(flag) + " '" + std::string(text) +
                                      "' is not a driver's CUDA version: expected MAJOR.MINOR, "
                                      "as nvidia-smi prints it (e.g. 12.8)");
  return v->driver_number();
}

CudaVersion driver_cuda_version(int driver_number) {
  return {driver_number / 1000, (driver_number % 1000) / 10};
}

std::optional<int> oldest_driver_release(int cuda_major) {
  switch (cuda_major) {
    case 13:
      return 580;
    case 12:
      return 525;
    case 11:
      return 450;
    default:
      return std::nullopt;
  }
}

std::string driver_words(int driver_number) { return "CUDA " + driver_cuda_version(driver_number).str(); }

std::string driver_needed(const CudaVersion& toolkit, bool ptx) {
  if (ptx) return "a driver of CUDA >= " + toolkit.str();
  const CudaVersion first = first_of_major(toolkit.major);
  if (auto release = oldest_driver_release(toolkit.major))
    return "a driver >= " + std::to_string(*release) + " (CUDA " + first.str() + ")";
  return "a driver of CUDA >= " + first.str();
}

std::optional<std::string> driver_refuses(const CudaVersion& toolkit, bool ptx, int driver_number) {
  const CudaVersion driver = driver_cuda_version(driver_number);
  const CudaVersion needed = ptx ? toolkit : first_of_major(toolkit.major);
  if (!(driver < needed)) return std::nullopt;
  return std::string(ptx ? "PTX " : "") + "built by CUDA " + toolkit.str() + ", needs " +
         driver_needed(toolkit, ptx) + "; this driver runs CUDA " + driver.str();
}

std::optional<std::string> driver_refuses(std::string_view toolkit, bool ptx, int driver_number) {
  auto v = parse_cuda_version(toolkit);
  if (!v) return "built by an unknown CUDA toolkit '" + std::string(toolkit) + "'";
  return driver_refuses(*v, ptx, driver_number);
}

std::optional<std::string> toolkit_cannot_build(const CudaVersion& toolkit, const Target& target) {
  const int arch = target.arch;
  const std::string cannot = "CUDA " + toolkit.str() + " cannot build " + target.str();
  auto needs = [&](const CudaVersion& from) -> std::optional<std::string> {
    if (toolkit < from) return cannot + " (it came with CUDA " + from.str() + ")";
    return std::nullopt;
  };
  if (toolkit.major >= 13 && (arch == 70 || arch == 72))
    return cannot + " (CUDA 13 dropped sm_70 and sm_72)";
  if (toolkit.major >= 13 && arch == 101) return cannot + " (CUDA 13.0 renamed it sm_110)";
  if (target.suffix == 'f')
    if (auto why = needs({12, 9})) return why;
  if (arch == 110) return needs({13, 0});
  if (arch == 103 || arch == 121) return needs({12, 9});
  if (arch >= 100) return needs({12, 8});
  if (arch == 90) return needs({11, 8});
  return std::nullopt;
}

}  // namespace kiln::format
