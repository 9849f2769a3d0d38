#pragma once
// The one target-choice rule (docs/loader.md "Target choice"): from a device's compute
// capability, the targets on offer and, when one kernel is asked for, its family's declared
// targets, the ordered candidates with the reason each may run, and the rejected ones with the
// reason each cannot. Pure. Every path calls it: the store tier (plan_stores), the mirror tier
// (over the pinned index's targets), `kiln fetch --device`, the failed get()'s advice, `kiln
// resolve` and `kiln compat --device`; the JIT tier (jit_refusal) asks the same family question
// (undeclared_target, project/registry.hpp) of the one target it would build.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "format/target.hpp"
#include "project/registry.hpp"

namespace kiln::plan {

struct TargetCandidate {
  format::Target target;
  int rank = 0;        // 0 exact SASS, 1 SASS of the same major and a lower minor, 2 PTX
  std::string reason;  // "exact SASS for CC 9.0 (arch-specific)"
};

struct TargetRefusal {
  format::Target target;
  std::string reason;  // "sm_90a runs only on CC 9.0 (arch-specific); the device is CC 8.6"
};

struct TargetChoice {
  int cc = 0;
  std::vector<TargetCandidate> candidates;  // best first
  std::vector<TargetRefusal> rejected;      // in the order offered
};

// Order: exact SASS for X.Y (arch-specific `a` first, then family `f`, then plain); else SASS
// of the same major and a lower minor, highest minor first (`f` family targets by their family
// rule, `a` targets never: they run only on their exact arch); else PTX of a lower or equal
// arch, highest first. Ties keep the offered order. Duplicates are listed once.
// `explain` false: the same order, with every reason left empty (the cold get's ranking of store
// directory names, which prints nothing, builds no words).
// `family` given (one kernel asked for): a target its declared targets do not admit is rejected
// too, with the family's reason (undeclared_target: "family 'x' is declared only for sm_90a"),
// however well it would run; nullptr: the choice for a whole archive, any family.
TargetChoice choose_targets(int cc, const std::vector<format::Target>& offered, bool explain = true,
                            const project::Family* family = nullptr);

// The same over target strings (an index's or a manifest's); a string that is not a target is
// rejected with "'x' is not a target".
struct NamedChoice {
  int cc = 0;
  std::vector<std::pair<std::string, std::string>> candidates;  // (target, reason), best first
  std::vector<std::pair<std::string, std::string>> rejected;    // (target, reason)
};
NamedChoice choose_named_targets(int cc, const std::vector<std::string>& offered,
                                 const project::Family* family = nullptr);

// Why no tier can serve `family` on cc whatever is on offer: none of its declared targets runs
// there ("family 'hopper_wgmma' is declared only for sm_90a, which cannot run on CC 8.6");
// nullopt when one does.
std::optional<std::string> family_cannot_run(const project::Family& family, int cc);

// The driver's half of the rule (format/toolkit.hpp driver_refuses) for an archive of `target`
// built by `toolkit`: why a driver of `driver` (cuDriverGetVersion's number) cannot run it;
// nullopt when it can, or when the driver is not known (driver 0).
std::optional<std::string> toolkit_refusal(const std::string& toolkit, const format::Target& target,
                                           int driver);
// What a candidate's reason gains when the driver was weighed: "; built by CUDA 12.9, which this
// driver (CUDA 12.8) runs"; "" when the driver is not known.
std::string toolkit_taken(const std::string& toolkit, int driver);

std::string device_target(int cc);  // "sm_90"
std::string cc_string(int cc);      // "9.0"

// Why `t` does not run on cc, in words ("sm_90a runs only on CC 9.0 (arch-specific); the device
// is CC 8.6").
std::string why_not_runnable(const format::Target& t, int cc);

// The targets of the release this libkiln belongs to, compiled in from ci/targets.txt (CMake
// cache variable KILN_RELEASE_TARGETS, which ci/release.sh sets from its --targets). Empty when
// the build did not say.
std::vector<std::string> release_targets();
// The targets compiled in are the reference package's, at this kiln's version: for that release
// they are release_targets(); for any other package or version nullopt (only its index knows).
// The one rule the loader's advice and resolve() and `kiln fetch --device --offline` share.
std::optional<std::vector<std::string>> compiled_release_targets(std::string_view package,
                                                                 std::string_view version);

}  // namespace kiln::plan
