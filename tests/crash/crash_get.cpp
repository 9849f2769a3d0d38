// The loader's tiers as an application drives them, for crash_points.sh: one get of URI through
// a Loader of the project at SOURCE (its package description, as kiln package-source compiles
// it), every setting from the environment as libkiln reads it (KILN_MIRRORS, KILN_INDEX_SHA256,
// KILN_CACHE_DIR, KILN_ARTIFACT_PATH, KILN_DISABLE_JIT...), the real mirror tier, scan record
// and JIT tier (NVRTC), and the CC 9.0 stand-in driver of tests/support/stand_in_driver.hpp: no GPU.
// Exit 0 when the kernel loaded, else the error's exit code with its message on stderr.
#include <exception>
#include <iostream>
#include <memory>

#include "kiln/error.hpp"
#include "kiln/loader.hpp"
#include "loader_factory.hpp"
#include "project/package.hpp"
#include "stand_in_driver.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: " << argv[0] << " SOURCE URI\n";
    return 2;
  }
  try {
    kiln::project::Project project = kiln::project::load_project(argv[1]);
    kiln::project::PackageData data(project);
    kiln::plan::LoaderDeps deps;
    deps.driver = std::make_shared<kiln::test::Cc90Driver>();
    deps.installed_store = "";
    auto loader = kiln::make_loader(*data.get(), kiln::LoaderConfig::from_env(), std::move(deps));
    loader->get(argv[2]);
    return 0;
  } catch (const kiln::Error& e) {
    std::cerr << "crash_get " << argv[2] << ": " << e.what() << "\n";
    return kiln::exit_code(e.kind());
  } catch (const std::exception& e) {
    std::cerr << "crash_get " << argv[2] << ": " << e.what() << "\n";
    return 1;
  }
}
