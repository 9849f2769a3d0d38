#include "tuf/tuf_delegation.hpp"

#include <cstdint>
#include <cstdio>
#include <vector>

#include "tuf/tuf_crypto.hpp"

namespace kiln::tuf {

namespace {
// One path segment against one pattern segment (no '/').
bool segment_matches(std::string_view s, std::string_view p) {
  std::size_t si = 0, pi = 0, star_p = std::string_view::npos, star_s = 0;
  auto class_match = [&](std::size_t& pidx, char c, bool& ok) -> bool {
    // p[pidx] == '['; returns false when the class is not closed (treat '[' literally)
    std::size_t j = pidx + 1;
    bool negate = false;
    if (j < p.size() && (p[j] == '!')) {
      negate = true;
      ++j;
    }
    std::size_t start = j;
    if (j < p.size() && p[j] == ']') ++j;
    while (j < p.size() && p[j] != ']') ++j;
    if (j >= p.size()) return false;
    bool found = false;
    for (std::size_t k = start; k < j; ++k) {
      if (k + 2 < j && p[k + 1] == '-') {
        if (c >= p[k] && c <= p[k + 2]) found = true;
        k += 2;
      } else if (p[k] == c) {
        found = true;
      }
    }
    ok = found != negate;
    pidx = j + 1;
    return true;
  };
  while (si < s.size()) {
    if (pi < p.size() && p[pi] == '*') {
      star_p = pi++;
      star_s = si;
      continue;
    }
    if (pi < p.size()) {
      if (p[pi] == '?') {
        ++pi;
        ++si;
        continue;
      }
      if (p[pi] == '[') {
        std::size_t np = pi;
        bool ok = false;
        if (class_match(np, s[si], ok)) {
          if (ok) {
            pi = np;
            ++si;
            continue;
          }
        } else if (s[si] == '[') {
          ++pi;
          ++si;
          continue;
        }
      } else if (p[pi] == s[si]) {
        ++pi;
        ++si;
        continue;
      }
    }
    if (star_p != std::string_view::npos) {
      pi = star_p + 1;
      si = ++star_s;
      continue;
    }
    return false;
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

std::vector<std::string_view> split_slash(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    std::size_t pos = s.find('/', start);
    if (pos == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}
// Hex digits of the highest bin: every bin's name is padded to this width.
int bin_name_width(int bit_length) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%llx",
                static_cast<unsigned long long>((std::uint64_t{1} << bit_length) - 1));
  return static_cast<int>(std::string_view(buf).size());
}
}  // namespace

bool path_matches_pattern(std::string_view target_path, std::string_view pattern) {
  auto t = split_slash(target_path);
  auto p = split_slash(pattern);
  if (t.size() != p.size()) return false;
  for (std::size_t i = 0; i < t.size(); ++i)
    if (!segment_matches(t[i], p[i])) return false;
  return true;
}

bool role_delegates_path(const DelegatedRole& role, std::string_view target_path) {
  if (role.path_hash_prefixes) {
    std::string h = *hex_digest("sha256", target_path);
    for (const auto& prefix : *role.path_hash_prefixes)
      if (h.compare(0, prefix.size(), prefix) == 0) return true;
    return false;
  }
  if (role.paths) {
    for (const auto& pattern : *role.paths)
      if (path_matches_pattern(target_path, pattern)) return true;
  }
  return false;
}

std::string succinct_role_for_target(const SuccinctRoles& roles, std::string_view target_path) {
  const int bit_length = roles.bit_length;
  std::string h = *hex_digest("sha256", target_path);
  std::uint32_t first = static_cast<std::uint32_t>(std::stoul(h.substr(0, 8), nullptr, 16));
  std::uint32_t bin = bit_length >= 32 ? first : first >> (32 - bit_length);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%0*x", bin_name_width(bit_length), bin);
  return roles.name_prefix + "-" + buf;
}

bool is_succinct_role(const SuccinctRoles& roles, std::string_view name) {
  const int bit_length = roles.bit_length;
  std::string prefix = roles.name_prefix + "-";
  if (name.substr(0, prefix.size()) != prefix) return false;
  std::string_view suffix = name.substr(prefix.size());
  if (suffix.size() != static_cast<std::size_t>(bin_name_width(bit_length))) return false;
  std::uint64_t v = 0;
  for (char c : suffix) {
    int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
    if (d < 0) return false;
    v = v * 16 + static_cast<std::uint64_t>(d);
  }
  return v < (std::uint64_t{1} << bit_length);
}

}  // namespace kiln::tuf
