#pragma once
// Shared by the two C ABI files (c_api.cpp: the loader, c_ops.cpp: the typed kernels): the
// loader object behind kiln_loader* and the one thread-local "last error" both report into.
#include <memory>
#include <string>

#include "kiln/error.hpp"
#include "kiln/kiln.h"
#include "kiln/loader.hpp"
#include "plan/resolver.hpp"

struct kiln_loader {
  std::unique_ptr<kiln::Loader> loader;
};

namespace kiln::c_api {
// Records msg as the calling thread's last error (kiln_last_error()) and returns st.
kiln_status fail(kiln_status st, const std::string& msg);
// kiln_loader_create over explicit dependencies (resolver.hpp): the test seam that gives the C
// ABI a driver reporting "no driver" on any machine. kiln_loader_create passes empty deps.
kiln_status loader_create_with(const kiln_package* package, const kiln_config* config,
                               kiln::plan::LoaderDeps deps, kiln_loader** out);
// Records a kiln::Error (message and context fields) and returns the status of its kind.
kiln_status fail(const kiln::Error& e);
}  // namespace kiln::c_api
