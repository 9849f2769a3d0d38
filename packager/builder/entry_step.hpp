#pragma once
// One grouped artifact's back end (`kiln build-entry`, which build.ninja runs after the front-end
// pass of its group): from the pass's PTX module to this URI's own fatbin.
// - Its entries are found in the module by demangled name (the registry's expressions; the
//   mangled names are known only once the front end ran).
// - SASS target: nvcc with the module as input and `-Xptxas -e=<entry>` per entry: ptxas compiles
//   only those entries (and what they call), fatbinary wraps the cubin. nvcc, not ptxas and
//   fatbinary by hand, so the family's flags reach both as in a per-specialisation compile.
// - PTX target: the entries' PTX is cut out of the module (ptx_slice), checked by compiling it
//   with ptxas for the target's arch, and wrapped by nvcc into a PTX-only fatbin.
// The result holds this URI's code only, so a get reads and verifies nothing of its siblings.
// docs/decisions.md, "One front-end pass per family and target".
#include <string>
#include <string_view>
#include <vector>

#include "format/target.hpp"

namespace kiln::builder {

// The mangled names of `expressions` among the module's `.entry` names, in the expressions'
// order (match_entries: by demangled name, whitespace-insensitive). Throws Error{Format} naming
// `what` (the URI's output) and the entry that is missing.
std::vector<std::string> module_entry_symbols(std::string_view ptx,
                                              const std::vector<std::string>& expressions,
                                              const std::string& what, const std::string& target);

// The PTX module cut down to the given entries: its header (.version, .target, .address_size),
// then, in the module's order, each top-level statement the entries reach: the entries
// themselves, and every function, function declaration and module-scope variable whose name a
// kept statement uses (transitively). Pure and deterministic: the same module and entries give
// the same bytes. Throws Error{Format} for a module it does not understand (no header, an
// unbalanced brace, a `.section` (debug data), an entry that is not in it).
std::string ptx_slice(std::string_view ptx, const std::vector<std::string>& entries);

struct EntryStep {
  std::string nvcc;                  // absolute path; ptxas is taken from beside it
  format::Target target;
  std::string pass_ptx;              // the front-end pass's module
  std::string out;                   // the fatbin to write
  std::vector<std::string> entries;  // the registry's entry expressions of this URI
  std::vector<std::string> nvcc_flags;  // --fatbin, -gencode ... (build.cpp's back-end flags)
};

// Runs the step; throws Error{Compile} with the tool's output when ptxas or nvcc fails.
void run_entry_step(const EntryStep& step);

}  // namespace kiln::builder
