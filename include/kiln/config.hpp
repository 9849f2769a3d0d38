#pragma once
// How a Loader is configured: every setting, each defaulting from its KILN_* variable. Part of the
// vocabulary below the loader: the core reads it without knowing the Loader class
// (kiln/loader.hpp). Defined in core/runtime/config.cpp.
#include <functional>
#include <string>
#include <vector>

#include "kiln/export.h"

namespace kiln {

struct LoaderConfig {
  // Each field defaults from its environment variable (from_env, one table: docs/loader.md
  // "Settings"); explicit values win.
  std::vector<std::string> artifact_path;  // KILN_ARTIFACT_PATH (':'-separated), searched first
  std::string cache_dir;  // KILN_CACHE_DIR, default $XDG_CACHE_HOME/kiln or ~/.cache/kiln
  std::vector<std::string> mirrors;  // KILN_MIRRORS (whitespace/','-separated URLs)
  std::string index_sha256;          // KILN_INDEX_SHA256: digest that pins a mirror's index
  // KILN_TUF_ROOT: a TUF root.json; mirrors are then TUF repositories and the index and archives
  // are verified through TUF metadata (docs/tuf.md). Empty: the root installed beside libkiln
  // (<prefix>/share/kiln/tuf/root.json) if any, unless index_sha256 is set. Both set: refused.
  std::string tuf_root;
  std::string ca_bundle;            // KILN_CA_BUNDLE: CA certificates for https mirrors
  bool offline = false;             // KILN_OFFLINE=1: no network access, ever
  bool disable_jit = false;         // KILN_DISABLE_JIT=1
  bool allow_stale = false;         // KILN_ALLOW_STALE=1: diagnostic bypass, warned on every use
  bool use_installed_store = true;  // the store installed beside the package's library
  // That store's directory; "" = <dir of the library defining the package>/../share/kiln/artifacts
  // (dladdr). For a description not in a library of an install tree (e.g. linked statically).
  std::string installed_store;
  std::string log_level = "warn";  // KILN_LOG=error|warn|info|debug
  int api_log = 0;                 // KILN_API_LOG=0..3
  std::string log_file;            // KILN_LOG_FILE (%p = pid); default stderr
  std::string nvrtc_library;       // KILN_NVRTC_LIBRARY; "" = libnvrtc.so.13, libnvrtc.so
  std::string cuda_home;           // KILN_CUDA_HOME, else CUDA_HOME, else CUDA_PATH: JIT headers

  // Throws Error{Usage} naming the variable on a bad value.
  KILN_API static LoaderConfig from_env();
  // Same, reading variables through `getenv` (returns null when unset), so tests need not
  // touch the process environment.
  KILN_API static LoaderConfig from_env(const std::function<const char*(const char*)>& getenv);
};

// A boolean setting: exactly 0/1/true/false/yes/no/on/off. Anything else throws Error{Usage}
// naming `name` (the variable or field) and the value.
KILN_API bool parse_bool_setting(const std::string& name, const std::string& value);

}  // namespace kiln
