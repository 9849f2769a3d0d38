// The commands answer for the node's driver, or for the one --driver names (docs/compatibility.md,
// "What each command says"): `kiln resolve` and `kiln compat` over a store holding one kernel
// built by CUDA 12.9 and by CUDA 13.0, for drivers of CUDA 11.8, 12.2, 12.8 and 13.0 on devices
// of CC 8.0, 9.0 and 12.0; the node's driver is the stand-in libcuda (bench/stand_in_libcuda.c)
// reporting what KILN_STAND_IN_DRIVER says.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "format/manifest.hpp"
#include "format/toolkit.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "kiln/version.hpp"
#include "project/package.hpp"
#include "project/package_description.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"
#include "wheel/wheel.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const std::string kUri = "axpy_dtype_f32";

// A store of the reference package: each target built by each toolkit given.
struct Store {
  test::TempDir tmp;
  fs::path dir = tmp / "store";
  Store(const std::vector<std::string>& toolkits, const std::vector<std::string>& targets) {
    for (const auto& cuda : toolkits) {
      test::ReleaseSpec rel;
      rel.loadable = true;
      rel.cuda_version = cuda;
      for (const auto& t : targets) {
        rel.with_artifacts({{kUri, "image-cuda" + cuda + "-" + t}});
        test::write_store_entry(dir, rel, t);
      }
    }
  }
  // The environment of a node whose only store is this one; `driver` > 0: the stand-in libcuda
  // reporting that driver and a device of `cc`; else no driver at all.
  std::string env(int driver = 0, int cc = 90) const {
    std::string e = "KILN_ARTIFACT_PATH='" + dir.string() + "' KILN_CACHE_DIR='" +
                    (tmp / "cache").string() + "' KILN_OFFLINE=1 KILN_DISABLE_JIT=1 KILN_MIRRORS= ";
    if (driver > 0)
      e += "LD_LIBRARY_PATH='" + test::stand_in_libcuda_dir().string() +
           "' KILN_STAND_IN_DRIVER=" + std::to_string(driver) +
           " KILN_STAND_IN_CC=" + std::to_string(cc) + " ";
    else
      e += "LD_LIBRARY_PATH=/nonexistent ";
    return e;
  }
};

bool have_stand_in() { return !test::stand_in_libcuda_dir().empty(); }

struct CliRun {
  int exit_code;
  Json j;
  std::string out;
};

CliRun kiln_json(const std::string& env, const std::string& args) {
  auto r = test::run("(" + env + test::kiln_cli() + " " + args + " --json 2>/dev/null)");
  CliRun out{r.exit_code, Json(), r.out};
  try {
    out.j = Json::parse(r.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not JSON: " << e.what() << "\n" << r.out;
  }
  return out;
}

TEST(DriverOption, OneParserForEveryCommandNamingTheFlag) {
  EXPECT_EQ(format::parse_driver_option("12.8", "--driver"), 12080);
  EXPECT_EQ(format::parse_driver_option("13.0", "--driver"), 13000);
  for (const char* bad : {"12", "580", "12.x", "", "0.1", "12.8.1"}) {
    std::string msg =
        test::error_of(ErrorKind::Usage, [&] { format::parse_driver_option(bad, "--driver"); });
    EXPECT_NE(msg.find("--driver '" + std::string(bad) + "'"), std::string::npos) << msg;
  }
  for (const char* cmd : {"resolve axpy_dtype_f32 --device sm_90", "compat --device sm_90 ."}) {
    auto r = test::run(test::kiln_cli() + " " + cmd + " --driver 580 2>&1");
    EXPECT_EQ(r.exit_code, 2) << cmd << ": " << r.out;
    EXPECT_NE(r.out.find("--driver '580' is not a driver's CUDA version"), std::string::npos)
        << r.out;
  }
}

// resolve --driver: the newest toolkit that driver runs, on each device; the driver named.
TEST(DriverOption, ResolveAnswersForTheDriverGiven) {
  Store s({"12.9", "13.0"}, {"sm_80", "sm_90", "sm_120"});
  struct Case {
    const char* driver;
    int cc;
    const char* toolkit;
  };
  for (const Case& c : {Case{"12.2", 80, "12.9"}, Case{"12.8", 90, "12.9"}, Case{"12.8", 120, "12.9"},
                        Case{"13.0", 80, "13.0"}, Case{"13.0", 90, "13.0"}, Case{"13.0", 120, "13.0"}}) {
    const std::string dev = "sm_" + std::to_string(c.cc);
    CliRun r = kiln_json(s.env(), "resolve " + kUri + " --device " + dev + " --driver " + c.driver);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(r.j["driver"], std::string("CUDA ") + c.driver);
    EXPECT_NE(r.j["chosen"]["path"].get<std::string>().find("cuda" + std::string(c.toolkit) + "-" + dev),
              std::string::npos)
        << c.driver << " " << dev << ": " << r.out;
  }
  // A driver older than every toolkit: nothing, each refusal naming both versions.
  CliRun old = kiln_json(s.env(), "resolve " + kUri + " --device sm_90 --driver 11.8");
  EXPECT_EQ(old.exit_code, 6) << old.out;
  EXPECT_TRUE(old.j["chosen"].is_null());
  EXPECT_NE(old.out.find("needs a driver >= 580 (CUDA 13.0); this driver runs CUDA 11.8"),
            std::string::npos)
      << old.out;
  // Without --driver and without a driver here: toolkits not weighed, the newest first, and said.
  CliRun none = kiln_json(s.env(), "resolve " + kUri + " --device sm_90");
  EXPECT_TRUE(none.j["driver"].is_null()) << none.out;
  auto text = test::run(s.env() + test::kiln_cli() + " resolve " + kUri +
                        " --device sm_90 --explain 2>/dev/null");
  EXPECT_NE(text.out.find("driver: not known (no driver here, no --driver)"), std::string::npos)
      << text.out;
}

// resolve without --driver on a node with a driver: the node's driver, as the loader does.
TEST(DriverOption, ResolveWeighsTheNodesDriverWithoutTheFlag) {
  if (!have_stand_in()) GTEST_SKIP() << "no stand-in libcuda (-DKILN_BUILD_BENCH=ON builds it)";
  Store s({"12.9", "13.0"}, {"sm_90"});
  CliRun r = kiln_json(s.env(12080, 90), "resolve " + kUri);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.j["driver"], "CUDA 12.8");
  EXPECT_NE(r.j["chosen"]["path"].get<std::string>().find("cuda12.9-sm_90"), std::string::npos)
      << r.out;
  // --driver answers for another driver than the node's.
  CliRun other = kiln_json(s.env(12080, 90), "resolve " + kUri + " --driver 13.0");
  EXPECT_NE(other.j["chosen"]["path"].get<std::string>().find("cuda13.0-sm_90"), std::string::npos)
      << other.out;
}

const Json* problem(const Json& pkg, const std::string& field) {
  for (const auto& p : pkg["problems"])
    if (p["field"] == field) return &p;
  return nullptr;
}

// compat --driver: a release with something the driver runs is compatible; one with nothing is
// unsupported (exit 5), naming the release's toolkits and the driver's version.
TEST(DriverOption, CompatRefusesAReleaseWithNothingTheDriverRuns) {
  Store both({"12.9", "13.0"}, {"sm_80", "sm_90", "sm_120"});
  for (const char* driver : {"12.2", "12.8", "13.0"})
    for (const char* dev : {"sm_80", "sm_90", "sm_120"}) {
      CliRun r = kiln_json("", "compat --device " + std::string(dev) + " --driver " + driver + " " +
                                both.dir.string());
      EXPECT_EQ(r.exit_code, 0) << driver << " " << dev << ": " << r.out;
      EXPECT_EQ(r.j["driver"], driver);
      EXPECT_EQ(r.j["driver_from"], "--driver");
    }
  CliRun old = kiln_json("", "compat --device sm_90 --driver 11.8 " + both.dir.string());
  EXPECT_EQ(old.exit_code, exit_code(ErrorKind::Unsupported)) << old.out;
  const Json* p = problem(old.j["packages"][0], "cuda_version");
  ASSERT_NE(p, nullptr) << old.out;
  EXPECT_EQ((*p)["package"], "12.9,13.0");
  EXPECT_EQ((*p)["loader"], "CUDA 11.8");
  EXPECT_NE((*p)["message"].get<std::string>().find("this driver runs CUDA 11.8"), std::string::npos)
      << old.out;

  Store only13({"13.0"}, {"sm_90"});
  for (const char* driver : {"12.2", "12.8"}) {
    CliRun r = kiln_json("", "compat --device sm_90 --driver " + std::string(driver) + " " +
                              only13.dir.string());
    EXPECT_EQ(r.exit_code, exit_code(ErrorKind::Unsupported)) << r.out;
    const Json* q = problem(r.j["packages"][0], "cuda_version");
    ASSERT_NE(q, nullptr) << r.out;
    EXPECT_NE((*q)["message"].get<std::string>().find(
                  "built by CUDA 13.0, needs a driver >= 580 (CUDA 13.0); this driver runs CUDA " +
                  std::string(driver)),
              std::string::npos)
        << r.out;
  }
  // No device checked: the same question over every archive.
  CliRun nodev = kiln_json("", "compat --device none --driver 12.8 " + only13.dir.string());
  EXPECT_EQ(nodev.exit_code, exit_code(ErrorKind::Unsupported)) << nodev.out;
  CliRun ok13 = kiln_json("", "compat --device sm_90 --driver 13.0 " + only13.dir.string());
  EXPECT_EQ(ok13.exit_code, 0) << ok13.out;
}

// Target wheels given together are a set: a cu13 wheel beside a cu12 wheel of the same target is
// "not for" a 12.x driver (a note), as a wheel of another target is not for a device; alone it
// is unsupported.
TEST(DriverOption, CompatOfTargetWheelsTogetherAnswersForTheSet) {
  test::TempDir dir;
  static const project::Project project = project::load_project(test::source_dir());
  static const project::PackageData data(project);
  const std::string v = kiln::version();
  for (const char* cuda : {"12.9", "13.0"}) {
    test::ReleaseSpec rel;
    rel.loadable = true;
    rel.cuda_version = cuda;
    rel.with_artifacts({{kUri, std::string("image of ") + cuda}});
    const fs::path d = dir / cuda;
    auto dist = test::write_release_dist(d, rel, {"sm_90a"});
    test::describe_release(dist, project::package_description_json(*data.get()));
    wheel::BuildOptions o;
    o.dist = d;
    o.out = dir.path();
    ASSERT_TRUE(wheel::build_wheels(o).failed.empty()) << cuda;
  }
  const std::string w12 = (dir / wheel::wheel_file_name("kiln-kernels", v, "12.9", "sm_90a")).string();
  const std::string w13 = (dir / wheel::wheel_file_name("kiln-kernels", v, "13.0", "sm_90a")).string();
  CliRun both = kiln_json("", "compat --device sm_90 --driver 12.8 " + w12 + " " + w13);
  EXPECT_EQ(both.exit_code, 0) << both.out;
  ASSERT_EQ(both.j["packages"].size(), 2u) << both.out;
  EXPECT_TRUE(both.j["packages"][1]["problems"].empty()) << both.out;
  EXPECT_CONTAINS(both.j["packages"][1]["notes"].dump(),
                  "not for this driver (CUDA 12.8, another wheel given serves it)");
  CliRun alone = kiln_json("", "compat --device sm_90 --driver 12.8 " + w13);
  EXPECT_EQ(alone.exit_code, exit_code(ErrorKind::Unsupported)) << alone.out;
  CliRun old = kiln_json("", "compat --device sm_90 --driver 11.8 " + w12 + " " + w13);
  EXPECT_EQ(old.exit_code, exit_code(ErrorKind::Unsupported)) << old.out;
}

// compat without --driver: the node's driver when there is one, else nothing weighed, and said.
TEST(DriverOption, CompatWeighsTheNodesDriverElseSaysItDidNot) {
  Store only13({"13.0"}, {"sm_90"});
  CliRun none = kiln_json("LD_LIBRARY_PATH=/nonexistent ", "compat --device sm_90 " + only13.dir.string());
  EXPECT_EQ(none.exit_code, 0) << none.out;
  EXPECT_TRUE(none.j["driver"].is_null());
  auto table = test::run("LD_LIBRARY_PATH=/nonexistent " + test::kiln_cli() + " compat --device sm_90 " +
                         only13.dir.string() + " 2>/dev/null");
  EXPECT_NE(table.out.find("driver  none here nor given (toolkits not weighed; pass --driver X.Y)"),
            std::string::npos)
      << table.out;
  if (!have_stand_in()) GTEST_SKIP() << "no stand-in libcuda (-DKILN_BUILD_BENCH=ON builds it)";
  CliRun node = kiln_json(only13.env(12080, 90), "compat " + only13.dir.string());
  EXPECT_EQ(node.exit_code, exit_code(ErrorKind::Unsupported)) << node.out;
  EXPECT_EQ(node.j["driver"], "12.8");
  EXPECT_EQ(node.j["driver_from"], "this node's driver");
  CliRun node13 = kiln_json(only13.env(13000, 90), "compat " + only13.dir.string());
  EXPECT_EQ(node13.exit_code, 0) << node13.out;
}

// A mirror directory of one release whose index lists, per target, the toolkits given.
struct Mirror {
  test::TempDir tmp;
  fs::path dist = tmp / "dist", dest = tmp / "store";
  std::string index_sha256;
  explicit Mirror(const std::vector<std::pair<std::string, std::string>>& target_toolkits) {
    test::ReleaseSpec rel;
    rel.zstd_level = 1;
    std::vector<format::IndexEntry> entries;
    for (const auto& [target, cuda] : target_toolkits) {
      rel.cuda_version = cuda;
      fs::path p = test::write_release_archive(dist, rel, target);
      std::size_t size = 0;
      std::string sha = io::sha256_file(p, &size);
      entries.push_back({p.filename().string(), target, cuda, size, sha});
    }
    const std::string json = format::index_to_json(test::release_index(rel, entries));
    test::write_file(dist / format::index_file_name(rel.package, rel.version), json);
    index_sha256 = io::sha256_hex(json);
  }
  std::string fetch(const std::string& args) const {
    return "fetch --mirror " + dist.string() + " --index-sha256 " + index_sha256 + " --dest " +
           dest.string() + " " + args;
  }
};

// fetch --device --driver: of the best target, the newest toolkit the driver runs; a target the
// driver runs none of is passed over for the next one; nothing left: unsupported naming both.
TEST(DriverOption, FetchTakesTheNewestToolkitTheDriverRunsOfTheBestTarget) {
  const std::string env =
      "env -u KILN_OFFLINE -u KILN_TUF_ROOT -u KILN_MIRRORS LD_LIBRARY_PATH=/nonexistent ";
  {
    Mirror m({{"sm_90a", "12.9"}, {"sm_90a", "13.0"}});
    for (const auto& [driver, want] : std::vector<std::pair<std::string, std::string>>{
             {"12.8", "-cuda12.9-sm_90a"}, {"13.0", "-cuda13.0-sm_90a"}}) {
      CliRun r = kiln_json(env, m.fetch("--device sm_90 --driver " + driver));
      ASSERT_EQ(r.exit_code, 0) << r.out;
      EXPECT_EQ(r.j["driver"], driver);
      EXPECT_EQ(r.j["driver_from"], "--driver");
      EXPECT_NE(r.j["installed"][0].get<std::string>().find(want), std::string::npos) << r.out;
      fs::remove_all(m.dest);
    }
    // No driver here and no --driver: not weighed (the newest), and said.
    CliRun none = kiln_json(env, m.fetch("--device sm_90"));
    EXPECT_TRUE(none.j["driver"].is_null()) << none.out;
    EXPECT_NE(none.j["installed"][0].get<std::string>().find("-cuda13.0-sm_90a"), std::string::npos);
  }
  {
    // sm_86 only from CUDA 13.0, sm_80 from both: a 12.8 driver on CC 8.6 gets sm_80 of 12.9.
    Mirror m({{"sm_80", "12.9"}, {"sm_80", "13.0"}, {"sm_86", "13.0"}});
    CliRun r = kiln_json(env, m.fetch("--device 8.6 --driver 12.8"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(r.j["target"], "sm_80");
    EXPECT_NE(r.j["installed"][0].get<std::string>().find("-cuda12.9-sm_80"), std::string::npos)
        << r.out;
    fs::remove_all(m.dest);
    CliRun ok = kiln_json(env, m.fetch("--device 8.6 --driver 13.0"));
    EXPECT_EQ(ok.j["target"], "sm_86") << ok.out;
    fs::remove_all(m.dest);
    auto old = test::run(env + test::kiln_cli() + " " + m.fetch("--device 8.6 --driver 11.8") +
                         " 2>&1");
    EXPECT_EQ(old.exit_code, exit_code(ErrorKind::Unsupported)) << old.out;
    EXPECT_NE(old.out.find("needs a driver >= 580 (CUDA 13.0); this driver runs CUDA 11.8"),
              std::string::npos)
        << old.out;
  }
}

// doctor: the driver's CUDA version, and of each package release in each store, which toolkits
// this driver runs; only archives it runs serve a device in the verdict.
TEST(DriverOption, DoctorSaysWhichToolkitsTheDriverRuns) {
  if (!have_stand_in()) GTEST_SKIP() << "no stand-in libcuda (-DKILN_BUILD_BENCH=ON builds it)";
  Store both({"12.9", "13.0"}, {"sm_90"});
  CliRun r = kiln_json(both.env(12080, 90), "doctor");
  EXPECT_EQ(r.j["driver"]["cuda_version"], "12.8") << r.out;
  const Json* store = nullptr;
  for (const auto& st : r.j["stores"])
    if (st["dir"] == both.dir.string()) store = &st;
  ASSERT_NE(store, nullptr) << r.out;
  ASSERT_EQ((*store)["toolkits"].size(), 2u) << r.out;
  const Json& t129 = (*store)["toolkits"][0];
  const Json& t130 = (*store)["toolkits"][1];
  EXPECT_EQ(t129["cuda_version"], "12.9");
  EXPECT_TRUE(t129["driver_runs"].get<bool>());
  EXPECT_EQ(t130["cuda_version"], "13.0");
  EXPECT_FALSE(t130["driver_runs"].get<bool>());
  EXPECT_EQ(t130["detail"],
            "built by CUDA 13.0, needs a driver >= 580 (CUDA 13.0); this driver runs CUDA 12.8");
  auto text = test::run(both.env(12080, 90) + test::kiln_cli() + " doctor 2>/dev/null");
  EXPECT_NE(text.out.find("driver: libcuda.so.1 loaded, runs CUDA 12.8"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(", CUDA 13.0: 1 archive(s), this driver runs none: built by CUDA 13.0"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find(", CUDA 12.9: 1 archive(s), this driver runs them"), std::string::npos)
      << text.out;

  // A driver older than every toolkit: the device is not served by the store.
  Store only13({"13.0"}, {"sm_90"});
  CliRun old = kiln_json(only13.env(12020, 90) + "KILN_DISABLE_JIT=1 ", "doctor");
  for (const auto& st : old.j["stores"])
    if (st["dir"] == only13.dir.string()) {
      ASSERT_EQ(st["toolkits"].size(), 1u);
      EXPECT_FALSE(st["toolkits"][0]["driver_runs"].get<bool>());
    }
  // (No NVRTC here: the real one's test compile crashes inside NVRTC over the stand-in libcuda.)
  CliRun ok = kiln_json(only13.env(13000, 90) + "KILN_NVRTC_LIBRARY=/nonexistent/libnvrtc.so ",
                        "doctor");
  for (const auto& st : ok.j["stores"]) {
    if (st["dir"] == only13.dir.string()) {
      EXPECT_TRUE(st["toolkits"][0]["driver_runs"].get<bool>());
    }
  }
}

}  // namespace
}  // namespace kiln
