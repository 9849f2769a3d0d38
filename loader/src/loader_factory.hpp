#pragma once
// A Loader with explicit dependencies: tests pass fakes for the driver, disk, compiler and
// fetcher. Private: not installed, not exported from libkiln.so; reached by linking the
// internal static library (kiln_internal) instead.
#include <memory>

#include "kiln/loader.hpp"
#include "plan/resolver.hpp"

namespace kiln {

std::unique_ptr<Loader> make_loader(const kiln_package& package, LoaderConfig config,
                                    plan::LoaderDeps deps);
// The same, constructed in `storage` (aligned, sizeof(Loader) bytes; the caller destroys it):
// lets a test build a second Loader at the address of a destroyed one.
Loader* make_loader_at(void* storage, const kiln_package& package, LoaderConfig config,
                       plan::LoaderDeps deps);

}  // namespace kiln
