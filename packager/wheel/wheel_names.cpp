// Wheel names (pure): distribution and file names, PEP 440 versions, RECORD hashes, and the
// plain-path rule for members (wheel.hpp, wheel_paths.hpp).
#include <algorithm>
#include <cctype>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

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
  auto t = format::parse_target(target);
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

std::string package_wheel_file_name(std::string_view package, std::string_view package_version) {
  return wheel_name_component(package) + "-" + pep440_version(package_version) +
         "-py3-none-any.whl";
}

std::string runtime_requirement(std::string_view kiln_version) {
  static const std::regex re(R"(^(\d+)\.(\d+)\.(\d+)(-.*)?$)");
  std::string v(kiln_version);
  std::smatch m;
  if (!std::regex_match(v, m, re))
    throw Error(ErrorKind::Format, "kiln version '" + v + "' is not MAJOR.MINOR.PATCH[-PRE]");
  const std::string major = m[1], minor = m[2];
  // A pre-release of MAJOR.MINOR.0 reads the formats of MAJOR.MINOR: let it in, and only it.
  std::string lower = major + "." + minor + ".0";
  if (m[3] == "0" && m[4].matched) lower = pep440_version(v);
  return "kiln>=" + lower + ",<" + major + "." + std::to_string(std::stoull(minor) + 1);
}

namespace {

// A PEP 440 version as kiln spells them (N[.N]*[aN|bN|rcN][.devN]), ordered: a dev release of
// X before X's pre-releases, pre-releases before X.
struct Pep440 {
  std::vector<unsigned long long> release;
  int phase = 0;  // 0 dev only, 1 a, 2 b, 3 rc, 4 final
  unsigned long long pre = 0;
  bool has_dev = false;
  unsigned long long dev = 0;
};

Pep440 parse_pep440(const std::string& v) {
  static const std::regex re(R"(^(\d+(?:\.\d+)*)(?:(a|b|rc)(\d+))?(?:\.dev(\d+))?$)");
  std::smatch m;
  if (!std::regex_match(v, m, re))
    throw Error(ErrorKind::Format, "'" + v + "' is not a version kiln writes (N.N.N[aN|bN|rcN])");
  Pep440 out;
  std::string rel = m[1];
  for (std::size_t start = 0;;) {
    auto dot = rel.find('.', start);
    out.release.push_back(std::stoull(rel.substr(start, dot - start)));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  while (out.release.size() > 1 && out.release.back() == 0) out.release.pop_back();
  out.has_dev = m[4].matched;
  if (out.has_dev) out.dev = std::stoull(m[4]);
  if (m[2].matched) {
    out.phase = m[2] == "a" ? 1 : m[2] == "b" ? 2 : 3;
    out.pre = std::stoull(m[3]);
  } else {
    out.phase = out.has_dev ? 0 : 4;
  }
  return out;
}

int compare_pep440(const Pep440& a, const Pep440& b) {
  if (a.release != b.release) return a.release < b.release ? -1 : 1;
  if (a.phase != b.phase) return a.phase < b.phase ? -1 : 1;
  if (a.pre != b.pre) return a.pre < b.pre ? -1 : 1;
  if (a.has_dev != b.has_dev) return a.has_dev ? -1 : 1;  // X.devN before X
  if (a.dev != b.dev) return a.dev < b.dev ? -1 : 1;
  return 0;
}

}  // namespace

bool satisfies(std::string_view version, std::string_view specifiers) {
  std::string specs(specifiers);
  auto first_op = specs.find_first_of("<>=!");
  if (first_op == std::string::npos)
    throw Error(ErrorKind::Format, "'" + specs + "' holds no version specifier");
  specs = specs.substr(first_op);
  const Pep440 v = parse_pep440(std::string(version));
  static const std::regex one(R"(^\s*(>=|<=|==|!=|>|<)\s*([^\s,]+)\s*$)");
  for (std::size_t start = 0;;) {
    auto comma = specs.find(',', start);
    std::string spec = specs.substr(start, comma == std::string::npos ? comma : comma - start);
    std::smatch m;
    if (!std::regex_match(spec, m, one))
      throw Error(ErrorKind::Format, "'" + spec + "' is not a version specifier kiln writes");
    const Pep440 bound = parse_pep440(m[2]);
    int c = compare_pep440(v, bound);
    const std::string op = m[1];
    // PEP 440: "<V" does not let in V's own pre-releases unless V is one.
    if (op == "<" && bound.phase == 4 && v.phase < 4 && v.release == bound.release) return false;
    bool ok = op == ">="   ? c >= 0
              : op == "<=" ? c <= 0
              : op == ">"  ? c > 0
              : op == "<"  ? c < 0
              : op == "==" ? c == 0
                           : c != 0;
    if (!ok) return false;
    if (comma == std::string::npos) return true;
    start = comma + 1;
  }
}

std::string record_hash(std::string_view data) {
  std::string hex = io::sha256_hex(data);
  unsigned char raw[32];
  for (int i = 0; i < 32; ++i)
    raw[i] = static_cast<unsigned char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return "sha256=" + base64_urlsafe_nopad(raw, sizeof raw);
}

}  // namespace kiln::wheel
