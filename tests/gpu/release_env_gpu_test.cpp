// The release as it ships, configured the way an application is: only through the environment
// (LoaderConfig::from_env, the store beside libkiln, KILN_* variables).
// scripts/gpu_release_check.sh runs this once per case (installed store, empty node + mirror,
// tampered first mirror, eight processes on one cache, offline JIT, offline without JIT, stale
// store, corrupt artifact) with the tarball's libkiln; every specialisation is checked against its
// CPU reference.
//
//   KILN_TEST_RELEASE_ENV=1          run (skipped otherwise: the normal suite has no release)
//   KILN_TEST_RELEASE_EXPECT=<kind>  every get must fail with this error kind (not-found, stale,
//                                    integrity, ...); each message is printed for the script
//   KILN_TEST_RELEASE_ORIGINS=<file> where each URI was loaded from, one "uri origin" per line
#include <fstream>

#include "gpu_util.hpp"
#include "kiln/kernels.h"
#include "spec_check.hpp"

namespace {

using namespace kiln::gpu_test;

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

TEST(ReleaseFromEnvironment, EverySpecialisationAsConfigured) {
  if (env_or("KILN_TEST_RELEASE_ENV", "").empty())
    GTEST_SKIP() << "KILN_TEST_RELEASE_ENV is not set: this test checks a shipped release "
                    "(scripts/gpu_release_check.sh run)";
  KILN_REQUIRE_GPU();
  const std::string expect = env_or("KILN_TEST_RELEASE_EXPECT", "");
  const std::string origins_file = env_or("KILN_TEST_RELEASE_ORIGINS", "");
  std::ofstream origins;
  if (!origins_file.empty()) origins.open(origins_file);

  kiln::Loader loader(*kiln_kernels_package(), kiln::LoaderConfig::from_env());
  int checked = 0;
  for (const auto& spec : kiln::test::reference_package().registry().specialisations) {
    if (!expect.empty()) {
      try {
        loader.get(spec.uri);
        ADD_FAILURE() << spec.uri << " loaded, but every get should fail with " << expect;
      } catch (const kiln::Error& e) {
        EXPECT_EQ(std::string(kiln::to_string(e.kind())), expect) << spec.uri << ": " << e.what();
        std::cout << "[" << spec.uri << "] error (" << kiln::to_string(e.kind())
                  << "): " << e.what() << "\n";
      }
      ++checked;
      continue;
    }
    for (int variant : {0, 1}) {
      ::testing::AssertionResult res = ::testing::AssertionFailure();
      try {
        res = check_spec(loader, spec, nullptr, variant);
      } catch (const kiln::Error& e) {
        res = ::testing::AssertionFailure()
              << "error (" << kiln::to_string(e.kind()) << "): " << e.what();
      }
      EXPECT_TRUE(res) << spec.uri << " variant " << variant;
    }
    const kiln::KernelHandle& h = loader.get(spec.uri);
    EXPECT_EQ(h.functions.size(), spec.entries.size()) << spec.uri;
    if (origins.is_open()) origins << spec.uri << " " << h.origin << "\n";
    ++checked;
  }
  std::cout << "checked " << checked << " specialisations"
            << (expect.empty() ? " against their CPU references" : ", each failing with " + expect)
            << "\n";
  EXPECT_EQ(checked,
            static_cast<int>(kiln::test::reference_package().registry().specialisations.size()));
}

}  // namespace
