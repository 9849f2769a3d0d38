#pragma once
// `kiln compat` over several inputs, each judged as its own package: the loader facts an input is
// judged with, the report of all of them merged with the notes a reader needs (judged as the
// package it names; no description, so no source hashes checked), and the devices to check.
// Unit-tested in tests/compat_test.cpp.
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kiln/package.h"
#include "release/compat.hpp"

namespace kiln::release {

// The loader's facts for an input that names its own package (`named`): the package as
// `described` gives it, or, when kiln has no description of it (nullptr), its name and version
// only, with no source hash to check (kernels_known false).
LoaderFacts facts_judged_as(const LoaderFacts& loader, const InputRelease& named,
                            const kiln_package* described);

// check_compat of each input with the facts `facts_for` gives it, merged into one report (the
// first input's loader facts), each package's judged_as set and a note where it was judged
// without a description or as another package than the first; target wheels judged as one set.
CompatReport check_compat_inputs(
    const std::vector<std::string>& inputs, const std::vector<int>& devices,
    const std::function<LoaderFacts(const std::filesystem::path&)>& facts_for);

// The devices --device names: compute capabilities (`parse` reads sm_90, 9.0, ...), "auto"
// (every GPU `present` reports; none when it throws: targets are then not checked, and the
// report says so), "none". Sorted, each once.
std::vector<int> compat_devices(const std::vector<std::string>& values,
                                const std::function<int(const std::string&)>& parse,
                                const std::function<std::vector<int>()>& present);

}  // namespace kiln::release
