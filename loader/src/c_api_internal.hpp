#pragma once
// Shared by the two C ABI files (c_api.cpp: the loader, c_ops.cpp: the typed kernels, generated
// from loader/ops_table.py): the loader object behind kiln_loader*, the one thread-local "last
// error" both report into, and the guard that keeps exceptions from crossing the ABI.
#include <exception>
#include <memory>
#include <new>
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

// Runs f(loader) for the C function `fn`: every exception becomes a status and the thread's
// last error; a NULL loader is KILN_ERROR_USAGE.
template <typename F>
kiln_status guarded_op(const char* fn, kiln_loader* loader, F&& f) {
  if (!loader || !loader->loader)
    return fail(KILN_ERROR_USAGE, std::string(fn) + ": loader is NULL");
  try {
    f(*loader->loader);
    return KILN_OK;
  } catch (const kiln::Error& e) {
    return fail(e);
  } catch (const std::bad_alloc&) {
    return fail(KILN_ERROR_INTERNAL, std::string(fn) + ": out of memory");
  } catch (const std::exception& e) {
    return fail(KILN_ERROR_INTERNAL, std::string(fn) + ": internal error: " + e.what());
  }
}
}  // namespace kiln::c_api
