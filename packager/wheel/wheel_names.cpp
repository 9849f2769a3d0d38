// Wheel names (pure): distribution and file names, PEP 440 versions, RECORD hashes, and the
// plain-path rule for members (wheel.hpp, wheel_paths.hpp).
#include <cctype>
#include <regex>
#include <string>
#include <string_view>

#include "format/target.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "wheel/wheel.hpp"
#include "wheel/wheel_paths.hpp"

namespace kiln::wheel {

namespace {

std::string base64_urlsafe_nopad(const unsigned char* data, std::size_t n) {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  std::size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    unsigned v = (data[i] << 16) | (data[i + 1] << 8) | data[i + 2];
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += alphabet[(v >> 6) & 63];
    out += alphabet[v & 63];
  }
  if (n - i == 1) {
    unsigned v = data[i] << 16;
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
  } else if (n - i == 2) {
    unsigned v = (data[i] << 16) | (data[i + 1] << 8);
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += alphabet[(v >> 6) & 63];
  }
  return out;
}

// Values that go into __init__.py string literals and METADATA: validated strings only, so no

std::string cuda_major(std::string_view cuda_version) {
  auto dot = cuda_version.find('.');
  std::string_view major = cuda_version.substr(0, dot);
  bool ok = !major.empty() &&
            std::all_of(major.begin(), major.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!ok)
    throw Error(ErrorKind::Format,
                "CUDA version '" + std::string(cuda_version) + "' does not start with a major");
  return std::string(major);
}

}  // namespace

bool is_plain_path(const std::string& p) {
  if (p.empty() || p.front() == '/' || p.back() == '/' || p.find('\\') != std::string::npos ||
      p.find('\0') != std::string::npos)
    return false;
  std::size_t start = 0;
  for (;;) {
    std::size_t slash = p.find('/', start);
    std::string part =
        p.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    if (slash == std::string::npos) return true;
    start = slash + 1;
  }
}

std::string distribution_name(std::string_view package, std::string_view cuda_version,
                              std::string_view target) {
  auto t = parse_target(target);
  if (!t) throw Error(ErrorKind::Usage, "'" + std::string(target) + "' is not a target");
  std::string compact = t->str();
  compact.erase(std::remove(compact.begin(), compact.end(), '_'), compact.end());
  return std::string(package) + "-cu" + cuda_major(cuda_version) + "-" + compact;
}

std::string wheel_name_component(std::string_view distribution) {
  std::string out;
  bool in_run = false;
  for (char c : distribution) {
    if (c == '-' || c == '_' || c == '.') {
      if (!in_run) out += '_';
      in_run = true;
    } else {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      in_run = false;
    }
  }
  return out;
}

std::string pep440_version(std::string_view package_version) {
  static const std::regex re(
      R"(^(\d+\.\d+\.\d+)(?:-(a|alpha|b|beta|rc|c|pre|preview|dev)\.?(\d+))?$)", std::regex::icase);
  std::string v(package_version);
  std::smatch m;
  if (!std::regex_match(v, m, re))
    throw Error(ErrorKind::Format, "package version '" + v +
                                       "' has no PEP 440 spelling (expected MAJOR.MINOR.PATCH, "
                                       "optionally -aN, -bN, -rcN or -devN)");
  if (!m[2].matched) return m[1];
  std::string pre = m[2];
  std::transform(pre.begin(), pre.end(), pre.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (pre == "alpha") pre = "a";
  if (pre == "beta") pre = "b";
  if (pre == "c" || pre == "pre" || pre == "preview") pre = "rc";
  if (pre == "dev") return std::string(m[1]) + ".dev" + std::to_string(std::stoull(m[3]));
  return std::string(m[1]) + pre + std::to_string(std::stoull(m[3]));
}

std::string wheel_file_name(std::string_view package, std::string_view package_version,
                            std::string_view cuda_version, std::string_view target) {
  return wheel_name_component(distribution_name(package, cuda_version, target)) + "-" +
         pep440_version(package_version) + "-py3-none-any.whl";
}

std::string record_hash(std::string_view data) {
  std::string hex = sha256_hex(data);
  unsigned char raw[32];
  for (int i = 0; i < 32; ++i)
    raw[i] = static_cast<unsigned char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return "sha256=" + base64_urlsafe_nopad(raw, sizeof raw);
}

}  // namespace kiln::wheel
