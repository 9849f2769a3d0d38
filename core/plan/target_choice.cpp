#include "plan/target_choice.hpp"

#include "format/toolkit.hpp"
#include "kiln/kernels.h"
#include "kiln/version.hpp"

#include <algorithm>
#include <tuple>

#ifndef KILN_RELEASE_TARGETS
#define KILN_RELEASE_TARGETS ""
#endif

namespace kiln::plan {

std::string cc_string(int cc) { return std::to_string(cc / 10) + "." + std::to_string(cc % 10); }
std::string device_target(int cc) { return "sm_" + std::to_string(cc); }

std::string why_not_runnable(const format::Target& t, int cc) {
  std::string dev = "; the device is CC " + cc_string(cc);
  std::string arch = cc_string(t.arch);
  if (t.suffix == 'a') return t.str() + " runs only on CC " + arch + " (arch-specific)" + dev;
  if (t.suffix == 'f')
    return t.str() + " runs only on CC " + std::to_string(t.major()) +
           ".x with x >= " + std::to_string(t.minor()) + " (family)" + dev;
  if (t.kind == format::Target::Kind::Ptx) return "PTX " + t.str() + " needs CC >= " + arch + dev;
  if (t.major() != cc / 10)
    return "SASS " + t.str() + " runs only on CC " + std::to_string(t.major()) + ".x" + dev;
  return "SASS " + t.str() + " needs CC >= " + arch + dev;
}

std::optional<std::string> toolkit_refusal(const std::string& toolkit, const format::Target& target,
                                           int driver) {
  if (driver <= 0) return std::nullopt;
  return format::driver_refuses(std::string_view(toolkit),
                                target.kind == format::Target::Kind::Ptx, driver);
}

std::string toolkit_taken(const std::string& toolkit, int driver) {
  if (driver <= 0) return "";
  return "; built by CUDA " + toolkit + ", which this driver (" + format::driver_words(driver) +
         ") runs";
}

namespace {

int suffix_rank(char s) { return s == 'a' ? 0 : s == 'f' ? 1 : 2; }

std::string kind_words(const format::Target& t) {
  return t.suffix == 'a' ? " (arch-specific)" : t.suffix == 'f' ? " (family)" : "";
}

}  // namespace

TargetChoice choose_targets(int cc, const std::vector<format::Target>& offered, bool explain,
                            const project::Family* family) {
  TargetChoice out;
  out.cc = cc;
  std::vector<format::Target> seen;
  for (const auto& t : offered) {
    if (std::find(seen.begin(), seen.end(), t) != seen.end()) continue;
    seen.push_back(t);
    if (!format::runs_on(t, cc)) {
      out.rejected.push_back({t, explain ? why_not_runnable(t, cc) : std::string()});
      continue;
    }
    if (family)
      if (auto why = project::undeclared_target(*family, t)) {
        out.rejected.push_back({t, explain ? std::move(*why) : std::string()});
        continue;
      }
    TargetCandidate c;
    c.target = t;
    if (t.kind == format::Target::Kind::Ptx) {
      c.rank = 2;
      if (explain)
        c.reason = "PTX " + t.str() + kind_words(t) + " of CC " + cc_string(t.arch) +
                   " <= " + cc_string(cc) + ": the driver JIT-compiles it";
    } else if (t.arch == cc) {
      c.rank = 0;
      if (explain) c.reason = "exact SASS for CC " + cc_string(cc) + kind_words(t);
    } else {
      c.rank = 1;
      if (explain)
        c.reason = "SASS " + t.str() + kind_words(t) + " of the same major, CC " +
                   cc_string(t.arch) + " <= " + cc_string(cc);
    }
    out.candidates.push_back(std::move(c));
  }
  std::stable_sort(out.candidates.begin(), out.candidates.end(),
                   [](const TargetCandidate& a, const TargetCandidate& b) {
                     return std::make_tuple(a.rank, -a.target.arch, suffix_rank(a.target.suffix)) <
                            std::make_tuple(b.rank, -b.target.arch, suffix_rank(b.target.suffix));
                   });
  return out;
}

NamedChoice choose_named_targets(int cc, const std::vector<std::string>& offered,
                                 const project::Family* family) {
  NamedChoice out;
  out.cc = cc;
  std::vector<format::Target> parsed;
  for (const auto& s : offered) {
    if (auto t = format::parse_target(s))
      parsed.push_back(*t);
    else
      out.rejected.emplace_back(s, "'" + s + "' is not a target");
  }
  TargetChoice c = choose_targets(cc, parsed, true, family);
  for (const auto& x : c.candidates) out.candidates.emplace_back(x.target.str(), x.reason);
  for (const auto& x : c.rejected) out.rejected.emplace_back(x.target.str(), x.reason);
  return out;
}

std::optional<std::string> family_cannot_run(const project::Family& family, int cc) {
  for (const auto& r : family.targets) {
    // An open rule ("sm_80+") admits sm_<cc> itself once cc reaches it; an exact one admits its
    // SASS and its PTX form.
    if (r.at_least && cc >= r.target.arch) return std::nullopt;
    format::Target ptx = r.target;
    ptx.kind = format::Target::Kind::Ptx;
    if (!r.at_least && (format::runs_on(r.target, cc) || format::runs_on(ptx, cc))) return std::nullopt;
  }
  return project::declared_only(family) + ", which cannot run on CC " + cc_string(cc);
}

std::optional<std::vector<std::string>> compiled_release_targets(std::string_view package,
                                                                 std::string_view version) {
  if (package != KILN_KERNELS_PACKAGE_NAME || version != kiln::version()) return std::nullopt;
  return release_targets();
}

std::vector<std::string> release_targets() {
  std::vector<std::string> out;
  std::string cur;
  for (char c : std::string(KILN_RELEASE_TARGETS) + ",") {
    if (c == ',' || c == ' ' || c == ';') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  return out;
}

}  // namespace kiln::plan
