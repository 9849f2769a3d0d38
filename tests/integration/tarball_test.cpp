// `kiln tarball` end to end, as a release pipeline and then a user run it: real nvcc builds a
// small release (axpy for sm_80 and sm_90), `cmake --install` makes the kiln install tree, the
// tarball is packed twice (same bytes), unpacked somewhere else, and then used with no KILN_*
// variable: `kiln doctor`, `kiln resolve --explain`, and a consumer project built with
// find_package(kiln) against the unpacked tree.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "format/manifest.hpp"
#include "kiln/version.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// No KILN_* variable, no LD_LIBRARY_PATH: only what the unpacked tree finds by itself.
std::string clean_env() {
  const char* home = std::getenv("HOME");
  return std::string("env -i PATH=/usr/local/bin:/usr/bin:/bin HOME='") + (home ? home : "/tmp") +
         "' ";
}

class KilnTarball : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    work_ = new test::TempDir();
    fs::path w = work_->path();
    std::string build = "SOURCE_DATE_EPOCH=1764403200 " + test::kiln_cli() +
                        " build --targets sm_80,sm_90 --only axpy --out " + (w / "b").string() +
                        " --dist " + (w / "dist").string() + " 2>&1";
    auto r = test::run(build);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    auto inst = test::run("cmake --install '" + std::string(KILN_TEST_BINARY_DIR) + "' --prefix '" +
                          (w / "stage").string() + "' --strip");
    ASSERT_EQ(inst.exit_code, 0) << inst.out;
  }
  static void TearDownTestSuite() {
    delete work_;
    work_ = nullptr;
  }
  static fs::path w() { return work_->path(); }
  static std::string tarball_name() {
    return "kiln-" + std::string(kiln::version()) + "-cuda" + kiln::cuda_version() +
#if defined(__x86_64__)
           "-linux-x86_64"
#else
           "-linux-aarch64"
#endif
           ".tar.zst";
  }
  static test::TempDir* work_;
};
test::TempDir* KilnTarball::work_ = nullptr;

TEST_F(KilnTarball, PacksTheSameBytesTwiceUnpacksAnywhereAndWorksWithoutEnvironment) {
  ASSERT_FALSE(HasFatalFailure());
  std::string kiln = (w() / "stage" / "bin" / "kiln").string();
  // (...) so that test::run's own 2>&1 does not bring the progress lines back into stdout.
  auto t1 = test::run("(" + kiln + " tarball --json --dist " + (w() / "dist").string() + " --out " +
                      (w() / "t1").string() + " 2>/dev/null)");
  ASSERT_EQ(t1.exit_code, 0) << t1.out;
  auto j = Json::parse(t1.out);
  EXPECT_EQ(fs::path(j["file"].get<std::string>()).filename(), tarball_name());
  EXPECT_EQ(j["targets"], Json::array({"sm_80", "sm_90"}));
  auto t2 = test::run(kiln + " tarball --dist " + (w() / "dist").string() + " --out " +
                      (w() / "t2").string());
  ASSERT_EQ(t2.exit_code, 0) << t2.out;
  std::string bytes1 = test::read_file(w() / "t1" / tarball_name());
  ASSERT_FALSE(bytes1.empty());
  EXPECT_TRUE(bytes1 == test::read_file(w() / "t2" / tarball_name())) << "not reproducible";
  // Nothing but the tarball is left in --out (no scratch directory, no temp file).
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(w() / "t1")) left.push_back(e.path().filename());
  EXPECT_EQ(left, std::vector<std::string>{tarball_name()});

  // Unpack into another prefix; the stage it was packed from goes away.
  fs::path prefix = w() / "somewhere else";
  fs::create_directories(prefix);
  auto x = test::run("tar --zstd -xf '" + (w() / "t1" / tarball_name()).string() + "' -C '" +
                     prefix.string() + "'");
  ASSERT_EQ(x.exit_code, 0) << x.out;
  struct MovedAway {  // the stage goes away for the rest of this test, and comes back after
    fs::path from, to;
    MovedAway(fs::path f, fs::path t) : from(std::move(f)), to(std::move(t)) {
      fs::rename(from, to);
    }
    ~MovedAway() { fs::rename(to, from); }
  } moved(w() / "stage", w() / "stage-moved");
  std::string top =
      tarball_name().substr(0, tarball_name().size() - std::string(".tar.zst").size());
  fs::path root = prefix / top;
  for (const char* rel :
       {"bin/kiln", "lib/libkiln.so", "lib/libkiln-kernels.so", "include/kiln/kernels.h",
        "include/kiln/package.h", "lib/cmake/kiln/KilnPackage.cmake", "include/kiln/loader.hpp",
        "include/kiln/kiln.h", "include/kiln/ops.hpp", "include/kiln/kiln_ops.h",
        "lib/cmake/kiln/kilnConfig.cmake",
        "lib/cmake/kiln/kilnConfigVersion.cmake", "lib/pkgconfig/kiln.pc"})
    EXPECT_TRUE(fs::exists(root / rel)) << rel;
  EXPECT_TRUE(fs::is_symlink(root / "lib" / "libkiln.so"));
  std::string stem90 =
      "kiln-kernels-" + std::string(kiln::version()) + "-cuda" + kiln::cuda_version() + "-sm_90";
  fs::path store = root / "share" / "kiln" / "artifacts";
  EXPECT_TRUE(fs::exists(store / stem90 / "manifest.json"));
  EXPECT_TRUE(fs::exists(store / stem90 / "axpy_dtype_f32.fatbin"));
  // The package's description ships beside the stores: a node answers from it (resolve, compat).
  EXPECT_TRUE(fs::exists(store / format::description_file_name("kiln-kernels", kiln::version())));

  // kiln doctor from the unpacked tree: the store beside it, found with no variable.
  std::string ukiln = "'" + (root / "bin" / "kiln").string() + "'";
  auto doc = test::run("(" + clean_env() + ukiln + " doctor --json 2>/dev/null)");
  auto dj = Json::parse(doc.out);
  bool found = false;
  for (const auto& s : dj["stores"])
    if (s["source"] == "installed beside this kiln") {
      found = true;
      EXPECT_EQ(fs::weakly_canonical(s["dir"].get<std::string>()), fs::weakly_canonical(store));
      EXPECT_EQ(s["archives"], 2) << doc.out;
      EXPECT_TRUE(s["readable"].get<bool>());
    }
  EXPECT_TRUE(found) << doc.out;
  EXPECT_EQ(dj["kiln"]["version"], kiln::version());

  auto res = test::run("(" + clean_env() + ukiln +
                       " resolve axpy_dtype_f16 --device sm_90 --explain --json 2>/dev/null)");
  ASSERT_EQ(res.exit_code, 0) << res.out;
  auto rj = Json::parse(res.out);
  EXPECT_EQ(rj["chosen"]["tier"], "store");
  EXPECT_EQ(rj["chosen"]["target"], "sm_90");
  EXPECT_EQ(fs::weakly_canonical(rj["chosen"]["path"].get<std::string>()),
            fs::weakly_canonical(store / stem90 / "axpy_dtype_f16.fatbin"));
  bool rejected80 = false;
  for (const auto& c : rj["rejected"])
    if (c["target"] == "sm_80") rejected80 = true;
  EXPECT_TRUE(rejected80) << res.out;

  // A consumer project: find_package(kiln) against the unpacked tree, link kiln::kiln, run; it
  // includes the generated headers (kiln/ops.hpp, kiln/kiln_ops.h) and calls into both.
  fs::path consumer = w() / "consumer";
  test::write_file(consumer / "CMakeLists.txt", R"(cmake_minimum_required(VERSION 3.20)
project(consumer LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 17)
find_package(kiln 0.1 REQUIRED)
add_executable(consumer main.cpp)
target_link_libraries(consumer PRIVATE kiln::kiln kiln::kernels)
file(WRITE ${CMAKE_BINARY_DIR}/found.txt "${kiln_VERSION} ${kiln_CUDA_VERSION}")
)");
  test::write_file(consumer / "main.cpp", R"(#include <kiln/kernels.h>
#include <kiln/kiln.h>
#include <kiln/kiln_ops.h>
#include <kiln/loader.hpp>
#include <kiln/ops.hpp>
#include <kiln/version.hpp>
#include <iostream>
int main() {
  kiln::Loader loader(*kiln_kernels_package(), kiln::LoaderConfig::from_env());
  if (kiln_op_reduce_sum_workspace_bytes() != kiln::ops::reduce_sum_workspace_bytes()) return 2;
  kiln::Resolution r = loader.resolve(kiln::ops::choose_uri_axpy(kiln::ops::DType::F32), 90);
  std::cout << kiln::version() << " " << kiln_version() << " "
            << (r.chosen ? r.chosen->tier + " " + r.chosen->path : std::string("none")) << "\n";
  return r.chosen ? 0 : 1;
}
)");
  std::string cfg = clean_env() + "cmake -S '" + consumer.string() + "' -B '" +
                    (consumer / "build").string() + "' -G Ninja -DCMAKE_PREFIX_PATH='" +
                    root.string() + "'";
  auto c = test::run(cfg);
  ASSERT_EQ(c.exit_code, 0) << c.out;
  EXPECT_EQ(test::read_file(consumer / "build" / "found.txt"),
            std::string(kiln::version()) + " " + kiln::cuda_version());
  auto b = test::run(clean_env() + "cmake --build '" + (consumer / "build").string() + "'");
  ASSERT_EQ(b.exit_code, 0) << b.out;
  auto run = test::run(clean_env() + "'" + (consumer / "build" / "consumer").string() + "'");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  std::string want = std::string(kiln::version()) + " " + kiln::version() + " store " +
                     (store / stem90 / "axpy_dtype_f32.fatbin").string();
  EXPECT_EQ(run.out.substr(0, run.out.find('\n')), want) << run.out;

  // A C client as a Makefile builds it: `pkg-config --cflags --libs kiln` against the unpacked
  // tree (lib/pkgconfig/kiln.pc finds its prefix from its own place), and it runs with no
  // variable (the rpath the .pc gives).
  if (test::run("command -v pkg-config >/dev/null").exit_code != 0)
    GTEST_SKIP() << "pkg-config is not installed (scripts/bootstrap.sh installs it)";
  fs::path c_client = w() / "c-client";
  test::write_file(c_client / "main.c", R"(#include <kiln/kernels.h>
#include <kiln/kiln.h>
#include <stdio.h>
int main(void) {
  kiln_loader* loader = NULL;
  kiln_status s = kiln_loader_create(kiln_kernels_package(), NULL, &loader);
  printf("%s %d\n", kiln_version(), (int)s);
  kiln_loader_destroy(loader);
  return s == KILN_OK ? 0 : 1;
}
)");
  const std::string pc = clean_env() + "PKG_CONFIG_PATH='" + (root / "lib" / "pkgconfig").string() +
                         "' pkg-config ";
  auto version = test::run(pc + "--modversion kiln");
  EXPECT_EQ(version.out, std::string(kiln::version()) + "\n");
  auto flags = test::run(pc + "--cflags --libs kiln");
  ASSERT_EQ(flags.exit_code, 0) << flags.out;
  // pkg-config escapes the space of "somewhere else" with a backslash, as a Makefile recipe reads
  // it; the build script below reads it the same way.
  EXPECT_CONTAINS(flags.out, "/lib/pkgconfig/../../include");
  EXPECT_CONTAINS(flags.out, "-lkiln -lkiln-kernels");
  test::write_file(c_client / "build.sh",
                   "eval \"cc -std=c99 -Wall -Werror -o client main.c $(pkg-config --cflags --libs "
                   "kiln)\"\n");
  auto cc = test::run("cd '" + c_client.string() + "' && " + clean_env() + "PKG_CONFIG_PATH='" +
                      (root / "lib" / "pkgconfig").string() + "' sh build.sh");
  ASSERT_EQ(cc.exit_code, 0) << cc.out << flags.out;
  auto crun = test::run(clean_env() + "'" + (c_client / "client").string() + "'");
  EXPECT_EQ(crun.exit_code, 0) << crun.out;
  EXPECT_EQ(crun.out, std::string(kiln::version()) + " 0\n");
}

TEST_F(KilnTarball, RefusesATargetNotInTheIndexAndATreeThatIsNotAnInstall) {
  ASSERT_FALSE(HasFatalFailure());
  std::string kiln = (w() / "stage" / "bin" / "kiln").string();
  auto r = test::run(kiln + " tarball --dist " + (w() / "dist").string() +
                     " --targets sm_100 --out " + (w() / "t3").string());
  EXPECT_EQ(r.exit_code, 6) << r.out;
  EXPECT_NE(r.out.find("sm_100"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sm_80, sm_90"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(w() / "t3" / tarball_name()));

  // The kiln of the build tree is not an install tree: it says how to make one.
  auto b = test::run(test::kiln_cli() + " tarball --dist " + (w() / "dist").string() + " --out " +
                     (w() / "t3").string());
  EXPECT_EQ(b.exit_code, 2) << b.out;
  EXPECT_NE(b.out.find("cmake --install"), std::string::npos) << b.out;

  auto p = test::run(test::kiln_cli() + " tarball --dist " + (w() / "dist").string() + " --out " +
                     (w() / "t3").string() + " --prefix " + (w() / "dist").string());
  EXPECT_EQ(p.exit_code, 6) << p.out;
  EXPECT_NE(p.out.find("kilnConfig.cmake"), std::string::npos) << p.out;
}

}  // namespace
}  // namespace kiln
