#pragma once
// What the Python runtime reports about the machine and this build (kiln.devices(),
// kiln.choose_target(), `python -m kiln doctor`): the same facts and the same one
// target-choice rule the C++ `kiln doctor` and the loader use (core/plan, core/runtime).
#include <nanobind/nanobind.h>

namespace kiln::python {

namespace nb = nanobind;

// devices(), choose_target(), target_choice(), parse_cc(), _doctor_facts(), version facts.
void bind_machine_facts(nb::module_& m);

// A compute capability as the API takes it (cc=): an int (90 = 9.0), "9.0", or a target name
// ("sm_90", "sm_90a", "compute_90"); Error{Usage} naming `name` otherwise. (A device, in the
// Python API, is an ordinal: kiln/_loader.py turns one into its compute capability.)
int parse_cc(nb::handle value, const char* name);

}  // namespace kiln::python
