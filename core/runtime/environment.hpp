#pragma once
// Every environment variable libkiln and the kiln CLI read, in one table (config.cpp): name,
// the field it sets, its parser and its documentation. LoaderConfig::from_env, the logs' first
// use, the JIT, the mirror tier and every CLI command read variables through it and nowhere
// else, so a bad value is the same Error{Usage} (naming the variable and the value, with fields
// `variable` and `value`) wherever it is met. docs/loader.md "Settings" lists exactly this
// table (EnvironmentTable.DocsListExactlyTheTableInOrder).
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/error.hpp"
#include "kiln/config.hpp"

namespace kiln::runtime {

// What the environment says. `loader` is the loader's configuration; the rest is read by the
// CLI alone (the build tools), or is an input to a default of `loader`.
struct Environment {
  LoaderConfig loader;
  std::string compiler_launcher;  // KILN_COMPILER_LAUNCHER: kiln build's default --launcher
  std::string build_cache;        // KILN_BUILD_CACHE: kiln build's default --cache
  // Read by nvcc itself; kiln build puts them in the result cache's key.
  std::string nvcc_ccbin;          // NVCC_CCBIN
  std::string nvcc_prepend_flags;  // NVCC_PREPEND_FLAGS
  std::string nvcc_append_flags;   // NVCC_APPEND_FLAGS
  std::string source_date_epoch;  // SOURCE_DATE_EPOCH: build/tarball/wheel time ("" = unset)
  std::string cuda_home;          // CUDA_HOME: where kiln build and doctor look for nvcc first
  std::string path;               // PATH: the programs kiln build and doctor may run
  std::string xdg_cache_home;     // XDG_CACHE_HOME: default of loader.cache_dir
  std::string home;               // HOME: default of loader.cache_dir without XDG_CACHE_HOME
};

using GetEnv = std::function<const char*(const char*)>;

struct EnvVariable {
  const char* name;
  const char* meaning;       // docs/loader.md "meaning" column
  const char* default_text;  // docs/loader.md "default" column
  // Parses a non-empty value into its field; throws Error{Usage} naming the variable and value.
  void (*apply)(Environment& env, const std::string& value);
};

// The table, in the order variables are applied (a later one may fill what an earlier one left).
const std::vector<EnvVariable>& env_variables();

// Every variable of the table through `getenv` (null or "" = unset), then the defaults that
// depend on several (cache_dir). Throws Error{Usage} for the first bad value, in table order.
Environment read_environment(const GetEnv& getenv);
Environment read_environment();  // the process environment

// One variable alone, through the same parser, for code that runs before any Loader exists (the
// logs' first use). Throws Error{Usage} like read_environment; Error{Internal} for a name that
// is not in the table.
void read_env_variable(Environment& env, std::string_view name, const GetEnv& getenv);
void read_env_variable(Environment& env, std::string_view name);  // the process environment

// The Error{Usage} of a bad value: "<name>='<value>' is not <what>: expected <expected>", with
// fields variable=<name>, value=<value>.
Error bad_env_value(std::string_view name, std::string_view value, std::string_view what,
                    std::string_view expected);

}  // namespace kiln::runtime
