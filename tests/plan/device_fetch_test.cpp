// `kiln fetch --device`'s choice (plan/device_fetch.hpp): the best target that runs on the
// device first, the next when a fetch fails, over a fake fetch: no mirror, disk or GPU.
#include "plan/device_fetch.hpp"

#include <gtest/gtest.h>

#include "kiln/error.hpp"

namespace kiln {
namespace {

struct FakeFetch {
  std::vector<std::string> asked;
  std::map<std::string, ErrorKind> fails;  // target -> the kind its fetch throws
  fetch::FetchResult operator()(const std::string& t) {
    asked.push_back(t);
    if (auto f = fails.find(t); f != fails.end()) throw Error(f->second, t + " is broken");
    fetch::FetchResult r;
    r.installed = {"/store/" + t};
    return r;
  }
};

plan::DeviceFetch run(FakeFetch& fake, int cc, const std::vector<std::string>& offered,
                std::vector<std::string>* log = nullptr) {
  return plan::fetch_best_target(
      cc, offered, "acme 1.0.0", [&](const std::string& t) { return fake(t); },
      [&](const std::string& m) {
        if (log) log->push_back(m);
      });
}

TEST(DeviceFetch, TheBestTargetThatRunsIsFetchedAlone) {
  FakeFetch fake;
  std::vector<std::string> log;
  plan::DeviceFetch d = run(fake, 90, {"sm_80", "sm_90", "sm_100"}, &log);
  EXPECT_EQ(d.target, "sm_90");
  EXPECT_EQ(fake.asked, std::vector<std::string>{"sm_90"});
  EXPECT_EQ(d.result.installed, std::vector<std::string>{"/store/sm_90"});
  bool rejected_100 = false;
  for (const auto& m : log) rejected_100 |= m.rfind("not sm_100: ", 0) == 0;
  EXPECT_TRUE(rejected_100);
}

TEST(DeviceFetch, AFailedFetchFallsBackToTheNextTargetThatRuns) {
  FakeFetch fake;
  fake.fails = {{"sm_90", ErrorKind::Integrity}};
  plan::DeviceFetch d = run(fake, 90, {"compute_80", "sm_90"});  // PTX runs on a later device
  EXPECT_EQ(d.target, "compute_80");
  EXPECT_EQ(fake.asked, (std::vector<std::string>{"sm_90", "compute_80"}));
}

TEST(DeviceFetch, EveryCandidateFailedIsTheFirstFailuresKindNamingEach) {
  FakeFetch fake;
  fake.fails = {{"sm_90", ErrorKind::Network}, {"compute_80", ErrorKind::Integrity}};
  try {
    run(fake, 90, {"compute_80", "sm_90"});
    FAIL() << "fetched";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Network);
    std::string m = e.what();
    EXPECT_NE(m.find("no archive of release acme 1.0.0 that can run on CC 9.0 could be fetched"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("\nsm_90: sm_90 is broken"), std::string::npos) << m;
    EXPECT_NE(m.find("\ncompute_80: compute_80 is broken"), std::string::npos) << m;
  }
}

TEST(DeviceFetch, UsageAndIoErrorsEndTheWalk) {
  for (ErrorKind k : {ErrorKind::Usage, ErrorKind::Io}) {
    FakeFetch fake;
    fake.fails = {{"sm_90", k}};
    try {
      run(fake, 90, {"sm_80", "sm_90"});
      FAIL() << "fetched";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), k);
    }
    EXPECT_EQ(fake.asked, std::vector<std::string>{"sm_90"});
  }
}

TEST(DeviceFetch, NothingThatRunsIsUnsupportedNamingWhatIsOffered) {
  FakeFetch fake;
  try {
    run(fake, 80, {"sm_90a", "sm_100"});
    FAIL() << "fetched";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("no archive of release acme 1.0.0 can run on CC 8.0 (it "
                                         "offers sm_90a, sm_100)"),
              std::string::npos)
        << e.what();
  }
  try {
    run(fake, 80, {});
    FAIL() << "fetched";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(it offers none)"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fake.asked.empty());
}

}  // namespace
}  // namespace kiln
