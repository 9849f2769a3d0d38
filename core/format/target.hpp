#pragma once
// SM targets as nvcc spells them (sm_80, sm_90a, sm_100f, compute_90) and the pure rules
// that say which target runs on which device.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::format {

struct Target {
  enum class Kind { Sass, Ptx };
  Kind kind = Kind::Sass;
  int arch = 0;     // 90 for sm_90a, 100 for sm_100f
  char suffix = 0;  // 0, 'a' (arch-specific) or 'f' (family)

  int major() const { return arch / 10; }
  int minor() const { return arch % 10; }
  std::string str() const;  // "sm_90a", "compute_80"
  bool operator==(const Target& o) const {
    return kind == o.kind && arch == o.arch && suffix == o.suffix;
  }
  bool operator<(const Target& o) const;  // by kind (SASS first), arch, suffix
};

// Syntax only ("sm_<digits>[a|f]" or "compute_<digits>[a|f]"); whether the toolkit can build
// it is the packager's capability check.
std::optional<Target> parse_target(std::string_view text);

// Does SASS/PTX built for `t` run on a device of compute capability cc (e.g. 90)?
// SASS sm_XY: same major, minor <= device minor; 'a': exact arch only; 'f': same major.
// PTX compute_XY: any device with cc >= XY ('a'/'f' PTX: same rules as SASS).
bool runs_on(const Target& t, int cc);

// A registry target rule: "sm_80+" (every target with arch >= 80) or an exact target.
struct TargetRule {
  Target target;
  bool at_least = false;
  std::string text;
};
std::optional<TargetRule> parse_target_rule(std::string_view text);
bool rule_allows(const std::vector<TargetRule>& rules, const Target& t);

std::vector<Target> parse_target_list(std::string_view comma_separated);  // throws Usage

}  // namespace kiln::format
