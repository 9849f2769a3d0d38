#include "format/target.hpp"

#include <tuple>

#include "kiln/error.hpp"

namespace kiln::format {

std::string Target::str() const {
  std::string s = kind == Kind::Sass ? "sm_" : "compute_";
  s += std::to_string(arch);
  if (suffix) s += suffix;
  return s;
}

bool Target::operator<(const Target& o) const {
  return std::tie(kind, arch, suffix) < std::tie(o.kind, o.arch, o.suffix);
}

std::optional<Target> parse_target(std::string_view text) {
  Target t;
  std::string_view rest;
  if (text.substr(0, 3) == "sm_") {
    t.kind = Target::Kind::Sass;
    rest = text.substr(3);
  } else if (text.substr(0, 8) == "compute_") {
    t.kind = Target::Kind::Ptx;
    rest = text.substr(8);
  } else {
    return std::nullopt;
  }
  if (!rest.empty() && (rest.back() == 'a' || rest.back() == 'f')) {
    t.suffix = rest.back();
    rest.remove_suffix(1);
  }
  if (rest.size() < 2 || rest.size() > 4 || rest[0] == '0') return std::nullopt;
  int arch = 0;
  for (char c : rest) {
    if (c < '0' || c > '9') return std::nullopt;
    arch = arch * 10 + (c - '0');
  }
  t.arch = arch;
  return t;
}

bool runs_on(const Target& t, int cc) {
  int dev_major = cc / 10;
  if (t.suffix == 'a') return t.arch == cc;
  if (t.suffix == 'f') return t.major() == dev_major && t.arch <= cc;
  if (t.kind == Target::Kind::Ptx) return t.arch <= cc;
  return t.major() == dev_major && t.arch <= cc;
}

std::optional<TargetRule> parse_target_rule(std::string_view text) {
  TargetRule r;
  r.text = std::string(text);
  std::string_view body = text;
  if (!body.empty() && body.back() == '+') {
    r.at_least = true;
    body.remove_suffix(1);
  }
  auto t = parse_target(body);
  if (!t) return std::nullopt;
  if (r.at_least && t->suffix) return std::nullopt;  // "sm_90a+" has no meaning
  r.target = *t;
  return r;
}

bool rule_allows(const std::vector<TargetRule>& rules, const Target& t) {
  for (const auto& r : rules) {
    if (r.at_least) {
      if (t.arch >= r.target.arch) return true;
    } else if (r.target.arch == t.arch && r.target.suffix == t.suffix) {
      // An exact rule names the arch; it admits both its SASS and its PTX form.
      return true;
    }
  }
  return false;
}

std::vector<Target> parse_target_list(std::string_view list) {
  std::vector<Target> out;
  while (!list.empty()) {
    auto comma = list.find(',');
    auto item = list.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) {
      auto t = parse_target(item);
      if (!t)
        throw Error(ErrorKind::Usage,
                    "'" + std::string(item) +
                        "' is not a target: expected sm_<arch>[a|f] or compute_<arch>[a|f], "
                        "e.g. sm_90a or compute_80");
      bool dup = false;
      for (auto& o : out) dup |= (o == *t);
      if (!dup) out.push_back(*t);
    }
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  if (out.empty()) throw Error(ErrorKind::Usage, "the target list is empty");
  return out;
}

}  // namespace kiln::format
