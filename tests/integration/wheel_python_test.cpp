// `kiln wheel` checked by real Python tools: pip installs the wheel into a fresh venv, the
// package's artifact_dir() is a store libkiln resolves kernels from (KILN_ARTIFACT_PATH),
// `wheel unpack` accepts it and refuses a tampered copy, check-wheel-contents passes.
// The tools come from PyPI: scripts/python_tools.sh makes a venv, KILN_TEST_PYTOOLS names it.
// Without it the tests skip, unless KILN_REQUIRE_PYTOOLS=1 (CI), where they fail.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "format/manifest.hpp"
#include "kiln/version.hpp"
#include "test_util.hpp"
#include "wheel/wheel.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

const char* kUri = "axpy_dtype_f32";
const char* kTarget = "sm_80";

std::string quote(const fs::path& p) { return "'" + p.string() + "'"; }

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// Rewrites one .fatbin member of a wheel with its first byte flipped, with Python's zipfile:
// RECORD stays as it was, so only a RECORD check can notice.
const char* kTamperPy = R"(import sys, zipfile
src, dst = sys.argv[1], sys.argv[2]
done = False
with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
    for info in zin.infolist():
        data = zin.read(info.filename)
        if not done and info.filename.endswith(".fatbin"):
            data = bytes([data[0] ^ 1]) + data[1:]
            done = True
        zout.writestr(info, data)
assert done, "no .fatbin member"
)";

// One real build (nvcc, one URI, one target) and its wheel, shared by the tests below.
class WheelPython : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* tools = std::getenv("KILN_TEST_PYTOOLS");
    if (tools && *tools) pytools_ = new fs::path(tools);
    if (!pytools_) return;
    work_ = new TempDir;
    auto r =
        test::run("SOURCE_DATE_EPOCH=1700000000 " + test::kiln_cli() + " build --out " +
                  quote(work_->path() / "build") + " --targets " + kTarget + " --only " + kUri);
    build_log_ = new std::string(std::to_string(r.exit_code) + ": " + r.out);
    if (r.exit_code != 0) return;
    r = test::run("SOURCE_DATE_EPOCH=1700000000 " + test::kiln_cli() + " wheel --dist " +
                  quote(work_->path() / "build" / "dist") + " --out " +
                  quote(work_->path() / "wheels"));
    *build_log_ += "\nkiln wheel " + std::to_string(r.exit_code) + ": " + r.out;
    if (r.exit_code != 0) return;
    wheel_ = new fs::path(
        work_->path() / "wheels" /
        wheel::wheel_file_name("kiln-kernels", kiln::version(), kiln::cuda_version(), kTarget));
    package_wheel_ = new fs::path(work_->path() / "wheels" /
                                  wheel::package_wheel_file_name("kiln-kernels", kiln::version()));
  }
  static void TearDownTestSuite() {
    delete wheel_;
    delete package_wheel_;
    package_wheel_ = nullptr;
    delete build_log_;
    delete work_;
    delete pytools_;
    wheel_ = nullptr;
    build_log_ = nullptr;
    work_ = nullptr;
    pytools_ = nullptr;
  }

  void SetUp() override {
    if (!pytools_) {
      const char* req = std::getenv("KILN_REQUIRE_PYTOOLS");
      if (req && std::string(req) == "1")
        FAIL() << "KILN_REQUIRE_PYTOOLS=1 but KILN_TEST_PYTOOLS is not set: run "
                  "scripts/python_tools.sh and export KILN_TEST_PYTOOLS=<the venv it prints>";
      GTEST_SKIP() << "KILN_TEST_PYTOOLS is not set: run scripts/python_tools.sh (it makes a venv "
                      "with wheel and check-wheel-contents from PyPI) and export "
                      "KILN_TEST_PYTOOLS=<the venv it prints>";
    }
    ASSERT_TRUE(fs::exists(*pytools_ / "bin" / "python"))
        << "KILN_TEST_PYTOOLS=" << *pytools_ << " holds no bin/python: run scripts/python_tools.sh";
    ASSERT_NE(wheel_, nullptr) << *build_log_;
    ASSERT_TRUE(fs::exists(*wheel_)) << *build_log_;
  }

  static std::string py() { return quote(*pytools_ / "bin" / "python"); }

  static fs::path* pytools_;
  static TempDir* work_;
  static std::string* build_log_;
  static fs::path* wheel_;
  static fs::path* package_wheel_;
};

fs::path* WheelPython::pytools_ = nullptr;
TempDir* WheelPython::work_ = nullptr;
std::string* WheelPython::build_log_ = nullptr;
fs::path* WheelPython::wheel_ = nullptr;
fs::path* WheelPython::package_wheel_ = nullptr;

TEST_F(WheelPython, PipInstallsItAndLibkilnResolvesFromArtifactDir) {
  TempDir dir;
  fs::path venv = dir / "venv";
  auto r = test::run("python3 -m venv " + quote(venv));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // --no-deps: the kiln runtime the package wheel requires is not here (tests/python/
  // test_pairing.py installs with it); this is the C/C++ program's recipe.
  r = test::run(quote(venv / "bin/python") +
                " -m pip install --no-index --no-deps --disable-pip-version-check " +
                quote(*wheel_) + " " + quote(*package_wheel_));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // What pip reads from the metadata: the pairing and the entry points the kiln module uses.
  const std::string dist = wheel::distribution_name("kiln-kernels", kiln::cuda_version(), kTarget);
  r = test::run(quote(venv / "bin/python") +
                " -c 'from importlib import metadata as m\n"
                "print(m.requires(\"" +
                dist +
                "\"))\n"
                "print(m.requires(\"kiln-kernels\"))\n"
                "print([(e.name, e.value, e.dist.version) for e in "
                "m.entry_points(group=\"kiln.targets\")])\n"
                "print([(e.name, e.value) for e in m.entry_points(group=\"kiln.packages\")])'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string v = kiln::version();
  // The package wheel: the runtime's range, and the release's one target (the only one its
  // index lists here) through its extra.
  const std::string extra = dist.substr(std::string("kiln-kernels-").size());
  EXPECT_EQ(r.out, "['kiln-kernels==" + v + "']\n['" + wheel::runtime_requirement(v) + "', '" +
                       dist + "==" + v + "; extra == \"" + extra + "\"']\n[('kiln-kernels', '" +
                       wheel::wheel_name_component(dist) + "', '" + v +
                       "')]\n[('kiln-kernels', 'kiln_kernels')]\n");

  const std::string pkg = wheel::wheel_name_component(
      wheel::distribution_name("kiln-kernels", kiln::cuda_version(), kTarget));
  r = test::run(quote(venv / "bin/python") + " -c 'import " + pkg +
                " as k; print(k.artifact_dir()); print(k.__version__, k.TARGET, k.CUDA_VERSION)'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto nl = r.out.find('\n');
  fs::path artifact_dir = r.out.substr(0, nl);
  EXPECT_TRUE(artifact_dir.is_absolute()) << artifact_dir;
  EXPECT_EQ(artifact_dir.string().rfind(venv.string(), 0), 0u) << artifact_dir;
  EXPECT_EQ(trim(r.out.substr(nl + 1)),
            std::string(kiln::version()) + " " + kTarget + " " + kiln::cuda_version());
  fs::path store =
      artifact_dir / format::archive_stem("kiln-kernels", kiln::version(), kiln::cuda_version(), kTarget);
  EXPECT_TRUE(fs::exists(store / "manifest.json")) << store;
  EXPECT_TRUE(fs::exists(store / (std::string(kUri) + ".fatbin"))) << store;

  // The recipe docs/wheels.md gives, as a user types it.
  r = test::run("KILN_ARTIFACT_PATH=$(" + quote(venv / "bin/python") + " -c 'import " + pkg +
                " as k; print(k.artifact_dir())') KILN_OFFLINE=1 KILN_DISABLE_JIT=1 " +
                "KILN_CACHE_DIR=" + quote(dir / "cache") + " " + test::kiln_cli() + " resolve " +
                kUri + " --device " + kTarget + " --explain");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find((store / (std::string(kUri) + ".fatbin")).string()), std::string::npos)
      << r.out;
}

TEST_F(WheelPython, WheelUnpackAcceptsItAndRefusesATamperedCopy) {
  TempDir dir;
  auto r = test::run(py() + " -m wheel unpack -d " + quote(dir / "good") + " " + quote(*wheel_));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_FALSE(fs::is_empty(dir / "good")) << r.out;

  test::write_file(dir / "tamper.py", kTamperPy);
  fs::path tampered = dir / "tampered" / wheel_->filename();
  fs::create_directories(tampered.parent_path());
  r = test::run(py() + " " + quote(dir / "tamper.py") + " " + quote(*wheel_) + " " +
                quote(tampered));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  r = test::run(py() + " -m wheel unpack -d " + quote(dir / "bad") + " " + quote(tampered));
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("Hash mismatch"), std::string::npos) << r.out;
  // kiln's own check says the same.
  auto problems = wheel::verify_wheel(tampered);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].file.find(".fatbin"), std::string::npos) << problems[0].file;
}

TEST_F(WheelPython, CheckWheelContentsPasses) {
  // No check is disabled: a data wheel with one top-level package passes all of them, and so
  // does the package's own wheel.
  for (const fs::path* w : {wheel_, package_wheel_}) {
    auto r = test::run(quote(*pytools_ / "bin" / "check-wheel-contents") + " " + quote(*w));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("OK"), std::string::npos) << r.out;
  }
}

TEST_F(WheelPython, WheelUnpackAcceptsThePackageWheelWithTheDescriptionInside) {
  TempDir dir;
  auto r =
      test::run(py() + " -m wheel unpack -d " + quote(dir / "pkg") + " " + quote(*package_wheel_));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string v = kiln::version();
  fs::path described = dir / "pkg" / ("kiln_kernels-" + v) / "kiln_kernels" /
                       format::description_file_name("kiln-kernels", v);
  EXPECT_TRUE(fs::exists(described)) << r.out;
  EXPECT_EQ(test::read_file(described), test::read_file(work_->path() / "build" / "dist" /
                                                        format::description_file_name("kiln-kernels", v)));
}

TEST_F(WheelPython, ZipfileReadsItWithoutWarningsAndSeesRecordLast) {
  auto r = test::run(py() +
                     " -W error -c 'import sys, zipfile\n"
                     "z = zipfile.ZipFile(sys.argv[1])\n"
                     "assert z.testzip() is None\n"
                     "names = z.namelist()\n"
                     "print(names[-1])\n"
                     "print(sorted(names[:-4]) == names[:-4])\n"
                     "print(set(i.date_time for i in z.infolist()))\n"
                     "print(set(i.external_attr >> 16 for i in z.infolist()))' " +
                     quote(*wheel_));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string di = wheel::wheel_name_component(wheel::distribution_name(
                             "kiln-kernels", kiln::cuda_version(), kTarget)) +
                         "-" + kiln::version() + ".dist-info";
  // SOURCE_DATE_EPOCH=1700000000 of the build: 2023-11-14T22:13:20Z (DOS keeps even seconds).
  EXPECT_EQ(r.out, di + "/RECORD\nTrue\n{(2023, 11, 14, 22, 13, 20)}\n{33188}\n");
}

}  // namespace
}  // namespace kiln
