#pragma once
// `kiln build` with an NVRTC toolkit (nvrtc_toolkit.hpp): the same plan as with nvcc (the same
// registry, targets, groups, stubs, result cache, shards and checks), its compiles spelled for
// NVRTC and ptxas, and run in this process instead of through ninja:
// - a front-end pass: NVRTC compiles the group stub to PTX for the target's virtual arch;
// - a grouped artifact's back end: `ptxas -arch=sm_XY -e <its entries>` on the pass's module
//   (SASS), or its entries' PTX cut out of the module (ptx_slice) and checked by ptxas (PTX),
//   then kiln writes the fatbin (fatbin_writer.hpp: these toolkits bring no fatbinary);
// - one compile per specialisation (after a failed pass, --one-nvcc-per-specialisation): NVRTC
//   on its own stub, then ptxas on every entry (SASS) or the PTX as is.
// The flag policy is nvcc's: C++17, the family's flags handed to NVRTC (an option NVRTC does not
// know fails the compile naming it), the family's -Xptxas/--ptxas-options values and
// -maxrregcount handed to ptxas, and a warning is an error (nvcc's -Werror all-warnings; NVRTC has
// no such option, so kiln fails a compile whose log holds a warning). docs/decisions.md, "An
// NVRTC build back end".
#include <memory>
#include <string>
#include <vector>

#include "builder/build.hpp"
#include "builder/command_runner.hpp"
#include "project/registry.hpp"

namespace kiln::builder {

class NvrtcToolkit;

// The plan with every compile spelled for NVRTC (pure): its stubs are nvrtc_stub_source's; a
// pass's args are `nvrtc <options> -o <ptx> <stub> <entry>...`; a grouped artifact's back end
// `--target T --pass P --out O --entry E... -- ptxas <options>`; a per-specialisation
// artifact's `nvrtc <options> [--ptxas <options>] -o <fatbin> <stub> <entry>...`. What the
// manifests record and the result cache keys.
BuildPlan nvrtc_plan(const BuildPlan& plan, const project::Registry& reg);

// The stub NVRTC compiles for these specialisations of `fam`: the family's sources, then one
// comment line per URI naming its entries (NVRTC instantiates them as name expressions, which
// the compile's args carry after the stub).
std::string nvrtc_stub_source(const project::Family& fam,
                              const std::vector<const project::Specialisation*>& specs);

// NVRTC's options for a family's compile for `virtual_arch` (e.g. compute_90a): -std=c++17,
// -frandom-seed=kiln (internal names that do not change from run to run), the kernels/ include,
// the family's flags, -arch.
std::vector<std::string> nvrtc_options(const std::vector<std::string>& family_flags,
                                       const std::string& kernels_include,
                                       const std::string& virtual_arch);
// ptxas's options for a target: -arch=sm_XY (sm_80 for compute_80: the check of a PTX target),
// then the family's -Xptxas/--ptxas-options values (split at commas) and -maxrregcount.
std::vector<std::string> ptxas_options(const std::vector<std::string>& family_flags,
                                       const format::Target& target);
// True when NVRTC's log holds a warning (`file(line): warning #...`): kiln's -Werror.
bool nvrtc_log_warns(const std::string& log);

// The runner of an NVRTC plan: passes first, then back ends, at most `jobs` at once, in this
// process (ptxas as a child). Reports like the ninja runner: failures by output, passes run, one
// progress line per artifact. It keeps no up-to-date state of its own: run_build puts a result
// cache in front of it (--cache, else <out>/nvrtc-results), which skips what is up to date.
std::unique_ptr<CommandRunner> make_nvrtc_runner(NvrtcToolkit& toolkit);

}  // namespace kiln::builder
