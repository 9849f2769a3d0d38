// `kiln wheel` and packager/wheel/wheel.hpp: names, contents, reproducible bytes, RECORD, verify_wheel
// catching tampering, target selection errors. Archives are made here without nvcc.
#include "wheel/wheel.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>

#include "format/archive.hpp"
#include "format/manifest.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "kiln/version.hpp"
#include "project/package.hpp"
#include "project/package_description.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

constexpr std::int64_t kBuildTime = 1764403200;  // 2025-11-29T08:00:00Z

// The release of these tests: archives written with mtime kBuildTime.
test::ReleaseSpec release() {
  test::ReleaseSpec rel;
  rel.build_time = kBuildTime;
  rel.archive_mtime = kBuildTime;
  return rel;
}

std::vector<format::ArchiveMember> members_for(const std::string& target,
                                       std::vector<test::SyntheticArtifact> artifacts = {
                                           {"axpy_dtype_f32", "f32-image"},
                                           {"axpy_dtype_f16", "f16-image"}}) {
  return test::release_members(release().with_artifacts(std::move(artifacts)), target);
}

// The reference package's description, as kiln build publishes it beside the index.
const std::string& reference_description() {
  static const project::Project project = project::load_project(test::source_dir());
  static const project::PackageData data(project);
  static const std::string json = project::package_description_json(*data.get());
  return json;
}

// A dist directory as `kiln build --dist` leaves it: archives (distinct artifact bytes per
// target, as real fatbins are), the package description and the index pinning them.
fs::path write_dist(const fs::path& dir, const std::vector<std::string>& targets) {
  auto dist = test::write_release_dist(dir, release(), targets);
  test::describe_release(dist, reference_description());
  return dir;
}

std::string package_whl_name() {
  return wheel::package_wheel_file_name("kiln-kernels", kiln::version());
}

std::string whl_name(const std::string& target) {
  return wheel::wheel_file_name("kiln-kernels", kiln::version(), "13.0", target);
}

std::vector<std::string> paths_of(const std::vector<wheel::WheelFile>& files) {
  std::vector<std::string> out;
  for (const auto& f : files) out.push_back(f.path);
  return out;
}

std::string problems_text(const std::vector<wheel::WheelProblem>& problems) {
  std::string s;
  for (const auto& p : problems) s += p.file + ": " + p.what + "\n";
  return s;
}

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Sets TZ for one scope: libarchive's DOS times go through localtime().
class ScopedTimeZone {
 public:
  explicit ScopedTimeZone(const char* tz) {
    if (const char* old = std::getenv("TZ")) old_ = old;
    ::setenv("TZ", tz, 1);
    ::tzset();
  }
  ~ScopedTimeZone() {
    if (old_)
      ::setenv("TZ", old_->c_str(), 1);
    else
      ::unsetenv("TZ");
    ::tzset();
  }

 private:
  std::optional<std::string> old_;
};

std::uint32_t local_header_dos_time(const std::string& zip) {
  auto b = [&](int i) { return static_cast<std::uint32_t>(static_cast<unsigned char>(zip[i])); };
  return b(10) | (b(11) << 8) | (b(12) << 16) | (b(13) << 24);
}

std::string cli(const std::string& args) { return test::kiln_cli() + " " + args; }

// ---------------------------------------------------------------- names

TEST(WheelNames, CudaMajorGoesInTheNameAndTheUnderscoreLeavesTheTarget) {
  EXPECT_EQ(wheel::distribution_name("kiln-kernels", "13.0", "sm_90a"), "kiln-kernels-cu13-sm90a");
  EXPECT_EQ(wheel::distribution_name("kiln-kernels", "13.0", "compute_80"),
            "kiln-kernels-cu13-compute80");
  EXPECT_EQ(wheel::wheel_name_component("kiln-kernels-cu13-sm90a"), "kiln_kernels_cu13_sm90a");
  EXPECT_EQ(wheel::wheel_file_name("kiln-kernels", "0.1.0", "13.0", "sm_90a"),
            "kiln_kernels_cu13_sm90a-0.1.0-py3-none-any.whl");
  EXPECT_EQ(wheel::wheel_file_name("kiln-kernels", "0.1.0", "12.8", "sm_100f"),
            "kiln_kernels_cu12_sm100f-0.1.0-py3-none-any.whl");
}

TEST(WheelNames, PrereleaseVersionsGetTheirPep440Spelling) {
  EXPECT_EQ(wheel::pep440_version("0.1.0"), "0.1.0");
  EXPECT_EQ(wheel::pep440_version("0.2.0-rc1"), "0.2.0rc1");
  EXPECT_EQ(wheel::pep440_version("0.2.0-beta.2"), "0.2.0b2");
  EXPECT_EQ(wheel::pep440_version("0.2.0-dev3"), "0.2.0.dev3");
  try {
    wheel::pep440_version("0.2.0-nightly");
    FAIL() << "expected Error{Format}";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Format);
    EXPECT_NE(std::string(e.what()).find("0.2.0-nightly"), std::string::npos) << e.what();
  }
}

TEST(WheelNames, RecordHashIsUrlsafeBase64WithoutPadding) {
  // sha256("") = e3b0c442...; the values hashlib + base64.urlsafe_b64encode give.
  EXPECT_EQ(wheel::record_hash(""), "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU");
  EXPECT_EQ(wheel::record_hash("hello\n"), "sha256=WJG1tSLV3whtD_CxEPvZ0hu0_HFjrzTQgoai6Eb2vgM");
}

// ---------------------------------------------------------------- contents

TEST(WheelContents, StoreLayoutUnderThePackageAndDistInfoLastWithRecordLast) {
  auto members = members_for("sm_90a");
  format::Manifest m = format::parse_manifest(members[0].data, "manifest.json");
  auto files = wheel::wheel_contents(m, members, "9.9.9");
  const std::string pkg = "kiln_kernels_cu13_sm90a";
  const std::string stem = format::archive_stem("kiln-kernels", kiln::version(), "13.0", "sm_90a");
  const std::string di = pkg + "-" + std::string(kiln::version()) + ".dist-info";
  EXPECT_EQ(paths_of(files), (std::vector<std::string>{
                                 pkg + "/__init__.py",
                                 pkg + "/artifacts/" + stem + "/axpy_dtype_f16.fatbin",
                                 pkg + "/artifacts/" + stem + "/axpy_dtype_f32.fatbin",
                                 pkg + "/artifacts/" + stem + "/manifest.json",
                                 di + "/METADATA",
                                 di + "/WHEEL",
                                 di + "/entry_points.txt",
                                 di + "/RECORD",
                             }));
  // The store copy is the archive's members byte for byte.
  EXPECT_EQ(files[3].data, members[0].data);
  EXPECT_EQ(files[5].data,
            "Wheel-Version: 1.0\nGenerator: kiln 9.9.9\nRoot-Is-Purelib: true\n"
            "Tag: py3-none-any\n");
  EXPECT_NE(files[4].data.find("Metadata-Version: 2.1\nName: kiln-kernels-cu13-sm90a\nVersion: " +
                               std::string(kiln::version()) + "\n"),
            std::string::npos)
      << files[4].data;
  EXPECT_NE(files[4].data.find("Requires-Python: "), std::string::npos);
  EXPECT_NE(files[0].data.find("def artifact_dir():"), std::string::npos);
  EXPECT_NE(files[0].data.find("TARGET = \"sm_90a\""), std::string::npos);
  EXPECT_NE(files[0].data.find("CUDA_VERSION = \"13.0\""), std::string::npos);
  EXPECT_NE(files[0].data.find("__version__ = \"" + std::string(kiln::version()) + "\""),
            std::string::npos);
}

TEST(WheelContents, TargetWheelRequiresItsPackageAtExactlyItsVersionAndNamesIt) {
  test::ReleaseSpec rel = release();
  rel.package = "acme-kernels";
  rel.version = "1.2.0-rc1";
  auto members = test::release_members(rel, "sm_90a");
  auto files = wheel::wheel_contents(format::parse_manifest(members[0].data, "m"), members, "0.1.0");
  const std::string di = "acme_kernels_cu13_sm90a-1.2.0rc1.dist-info";
  std::map<std::string, std::string> by_path;
  for (const auto& f : files) by_path[f.path] = f.data;
  EXPECT_CONTAINS(by_path[di + "/METADATA"], "\nRequires-Dist: acme-kernels==1.2.0rc1\n");
  EXPECT_EQ(by_path[di + "/entry_points.txt"],
            "[kiln.targets]\nacme-kernels = acme_kernels_cu13_sm90a\n");
}

TEST(WheelContents, PackageWheelOffersAnExtraPerTargetWheelPinnedToItsVersion) {
  auto files = wheel::package_wheel_contents(
      "acme-kernels", "1.2.0-rc1", {"acme-kernels-1.2.0-rc1.package.json", "{}"}, "0.3.4",
      {wheel::distribution_name("acme-kernels", "13.0", "sm_90a"),
       wheel::distribution_name("acme-kernels", "13.0", "compute_80")});
  const std::string& metadata = files[2].data;
  ASSERT_NE(files[2].path.find("/METADATA"), std::string::npos);
  // Sorted, each extra before its requirement; pip normalises neither further (PEP 685).
  EXPECT_CONTAINS(metadata,
                  "Provides-Extra: cu13-compute80\n"
                  "Requires-Dist: acme-kernels-cu13-compute80==1.2.0rc1; extra == \"cu13-compute80\"\n"
                  "Provides-Extra: cu13-sm90a\n"
                  "Requires-Dist: acme-kernels-cu13-sm90a==1.2.0rc1; extra == \"cu13-sm90a\"\n");
  EXPECT_EQ(metadata.find("Requires-Dist: acme-kernels-cu13-sm90a==1.2.0rc1\n"), std::string::npos);
  // Every target required as well, when asked (kiln wheel --require-every-target).
  auto every = wheel::package_wheel_contents(
      "acme-kernels", "1.2.0-rc1", {"acme-kernels-1.2.0-rc1.package.json", "{}"}, "0.3.4",
      {wheel::distribution_name("acme-kernels", "13.0", "sm_90a")}, true);
  EXPECT_CONTAINS(every[2].data, "\nRequires-Dist: acme-kernels-cu13-sm90a==1.2.0rc1\n");
  // A target wheel of another package is a caller's mistake, not metadata to write.
  kiln::test::error_of(ErrorKind::Internal, [&] {
    wheel::package_wheel_contents("acme-kernels", "1.2.0", {"d.package.json", "{}"}, "0.3.4",
                                  {"other-kernels-cu13-sm90a"});
  });
}

TEST(WheelContents, PackageWheelHoldsTheDescriptionAndRequiresTheRuntimeOfThisMinor) {
  auto files = wheel::package_wheel_contents(
      "acme-kernels", "1.2.0", {"acme-kernels-1.2.0.package.json", "{\"described\": 1}"}, "0.3.4");
  const std::string di = "acme_kernels-1.2.0.dist-info";
  EXPECT_EQ(paths_of(files), (std::vector<std::string>{
                                 "acme_kernels/__init__.py",
                                 "acme_kernels/acme-kernels-1.2.0.package.json",
                                 di + "/METADATA",
                                 di + "/WHEEL",
                                 di + "/entry_points.txt",
                                 di + "/RECORD",
                             }));
  EXPECT_EQ(files[1].data, "{\"described\": 1}");  // the pinned bytes, as they are
  EXPECT_CONTAINS(files[2].data, "Name: acme-kernels\nVersion: 1.2.0\n");
  EXPECT_CONTAINS(files[2].data, "\nRequires-Dist: kiln>=0.3.0,<0.4\n");
  EXPECT_EQ(files[4].data, "[kiln.packages]\nacme-kernels = acme_kernels\n");
  EXPECT_CONTAINS(files[0].data, "def description_path():");
  EXPECT_CONTAINS(files[0].data, "\"acme-kernels-1.2.0.package.json\"");
  EXPECT_EQ(files.back().data.substr(files.back().data.size() - (di.size() + 10)),
            di + "/RECORD,,\n");
}

TEST(WheelNames, RuntimeRequirementIsTheSameMajorMinorAsTheKilnThatWritesIt) {
  EXPECT_EQ(wheel::runtime_requirement("0.1.0"), "kiln>=0.1.0,<0.2");
  EXPECT_EQ(wheel::runtime_requirement("0.1.7"), "kiln>=0.1.0,<0.2");
  EXPECT_EQ(wheel::runtime_requirement("2.9.1"), "kiln>=2.9.0,<2.10");
  EXPECT_EQ(wheel::runtime_requirement("0.2.0-rc1"), "kiln>=0.2.0rc1,<0.3");
  EXPECT_EQ(wheel::package_wheel_file_name("acme-kernels", "1.2.0-rc1"),
            "acme_kernels-1.2.0rc1-py3-none-any.whl");
}

TEST(WheelNames, SatisfiesReadsTheSpecifiersKilnWrites) {
  EXPECT_TRUE(wheel::satisfies("0.1.0", "kiln>=0.1.0,<0.2"));
  EXPECT_TRUE(wheel::satisfies("0.1.9", "kiln>=0.1.0,<0.2"));
  EXPECT_FALSE(wheel::satisfies("0.2.0", "kiln>=0.1.0,<0.2"));
  EXPECT_FALSE(wheel::satisfies("0.0.9", "kiln>=0.1.0,<0.2"));
  EXPECT_FALSE(wheel::satisfies("0.2.0rc1", "kiln>=0.1.0,<0.2"));  // "<0.2" keeps 0.2's pre out
  EXPECT_TRUE(wheel::satisfies("0.2.0rc1", "kiln>=0.2.0rc1,<0.3"));
  EXPECT_FALSE(wheel::satisfies("0.2.0b1", "kiln>=0.2.0rc1,<0.3"));
  EXPECT_TRUE(wheel::satisfies("1.2.0", "==1.2"));
  EXPECT_THROW(wheel::satisfies("0.1.0", "kiln~=0.1"), Error);
}

TEST(WheelContents, RecordListsEveryOtherFileWithDigestAndSizeAndItselfWithout) {
  auto members = members_for("sm_80");
  auto files = wheel::wheel_contents(format::parse_manifest(members[0].data, "m"), members, "0.1.0");
  std::string expected;
  for (std::size_t i = 0; i + 1 < files.size(); ++i)
    expected += files[i].path + "," + wheel::record_hash(files[i].data) + "," +
                std::to_string(files[i].data.size()) + "\n";
  expected += files.back().path + ",,\n";
  EXPECT_EQ(files.back().data, expected);
  EXPECT_NE(expected.find("/axpy_dtype_f32.fatbin," + wheel::record_hash("f32-image") + ",9\n"),
            std::string::npos)
      << expected;
}

// ---------------------------------------------------------------- bytes

TEST(WheelBuild, SameInputsGiveTheSameBytesInAnyOutputDirAndTimeZone) {
  TempDir dir;
  write_dist(dir / "dist", {"sm_80", "sm_90a"});
  wheel::BuildOptions o;
  o.dist = dir / "dist";
  o.out = dir / "a";
  auto a = wheel::build_wheels(o);
  o.out = dir / "b";
  wheel::BuildResult b;
  {
    ScopedTimeZone tz("KST-9");  // 08:00Z is 17:00 there: other DOS fields if unpatched
    b = wheel::build_wheels(o);
  }
  o.out = dir / "c";
  wheel::BuildResult c;
  {
    ScopedTimeZone tz("PST+8");
    c = wheel::build_wheels(o);
  }
  ASSERT_EQ(a.wheels.size(), 3u);
  ASSERT_TRUE(a.failed.empty());
  for (const auto& name : {whl_name("sm_80"), whl_name("sm_90a"), package_whl_name()}) {
    const auto& t = name;
    std::string bytes = test::read_file(dir / "a" / name);
    ASSERT_FALSE(bytes.empty()) << t;
    EXPECT_EQ(bytes, test::read_file(dir / "b" / name)) << t;
    EXPECT_EQ(bytes, test::read_file(dir / "c" / name)) << t;
  }
  EXPECT_EQ(a.wheels[0].target, "");  // the package's own wheel comes first
  EXPECT_EQ(a.wheels[0].sha256, io::sha256_file(dir / "a" / package_whl_name()));
  EXPECT_EQ(a.wheels[1].sha256, io::sha256_file(dir / "a" / whl_name("sm_80")));
  EXPECT_EQ(a.wheels[1].size, fs::file_size(dir / "a" / whl_name("sm_80")));
}

TEST(WheelBuild, TimestampIsSourceDateEpochInUtcClampedTo1980) {
  TempDir dir;
  wheel::WheelFile f{"pkg/a.txt", "a"};
  // 2025-11-29T08:00:00Z: date (45 << 9 | 11 << 5 | 29), time (8 << 11).
  std::string z = wheel::write_zip(dir / "x.zip", {f}, kBuildTime);
  EXPECT_EQ(local_header_dos_time(z), (((45u << 9) | (11u << 5) | 29u) << 16) | (8u << 11));
  z = wheel::write_zip(dir / "y.zip", {f}, 0);
  EXPECT_EQ(local_header_dos_time(z), 0x00210000u);  // 1980-01-01 00:00:00
  EXPECT_EQ(test::read_file(dir / "y.zip"), z);
}

TEST(WheelBuild, SourceDateEpochChangesOnlyTheTimestampsThroughTheCli) {
  TempDir dir;
  write_dist(dir / "dist", {"sm_80"});
  auto r1 =
      test::run("SOURCE_DATE_EPOCH=1700000000 " +
                cli("wheel --dist " + (dir / "dist").string() + " --out " + (dir / "a").string()));
  ASSERT_EQ(r1.exit_code, 0) << r1.out;
  auto r2 =
      test::run("SOURCE_DATE_EPOCH=1700000000 " +
                cli("wheel --dist " + (dir / "dist").string() + " --out " + (dir / "b").string()));
  ASSERT_EQ(r2.exit_code, 0) << r2.out;
  auto r3 = test::run("SOURCE_DATE_EPOCH=soon " + cli("wheel --dist " + (dir / "dist").string() +
                                                      " --out " + (dir / "c").string()));
  EXPECT_EQ(r3.exit_code, 2) << r3.out;
  std::string a = test::read_file(dir / "a" / whl_name("sm_80"));
  EXPECT_EQ(a, test::read_file(dir / "b" / whl_name("sm_80")));
  wheel::BuildOptions o;
  o.dist = dir / "dist";
  o.out = dir / "d";
  wheel::build_wheels(o);  // manifest build_time instead
  std::string d = test::read_file(dir / "d" / whl_name("sm_80"));
  EXPECT_EQ(a.size(), d.size());
  EXPECT_NE(a, d);
}

TEST(WheelBuild, ZipHoldsFilesInContentOrderAndReadsBackExactly) {
  TempDir dir;
  write_dist(dir / "dist", {"sm_80"});
  wheel::BuildOptions o;
  o.dist = dir / "dist";
  o.out = dir / "out";
  wheel::build_wheels(o);
  auto files = wheel::read_zip(dir / "out" / whl_name("sm_80"));
  auto members = format::read_archive(dir / "dist" /
                              format::archive_file_name("kiln-kernels", kiln::version(), "13.0", "sm_80"));
  const std::string described = format::description_file_name("kiln-kernels", kiln::version());
  auto expected = wheel::wheel_contents(format::parse_manifest(members[0].data, "m"), members,
                                        kiln::version(), {{described, reference_description()}});
  ASSERT_EQ(paths_of(files), paths_of(expected));
  for (std::size_t i = 0; i < files.size(); ++i) EXPECT_EQ(files[i].data, expected[i].data);
  EXPECT_EQ(files_in(dir / "out"),
            (std::vector<std::string>{package_whl_name(), whl_name("sm_80")}));
}

// ---------------------------------------------------------------- verify_wheel

class WheelVerify : public ::testing::Test {
 protected:
  void SetUp() override {
    write_dist(dir_ / "dist", {"sm_90a"});
    wheel::BuildOptions o;
    o.dist = dir_ / "dist";
    o.out = dir_ / "out";
    ASSERT_EQ(wheel::build_wheels(o).wheels.size(), 2u);  // the package's own and sm_90a's
    good_ = dir_ / "out" / whl_name("sm_90a");
    files_ = wheel::read_zip(good_);
  }
  fs::path rewrite(const std::vector<wheel::WheelFile>& files,
                   const std::string& name = whl_name("sm_90a")) {
    fs::path p = dir_ / "bad" / name;
    fs::create_directories(p.parent_path());
    wheel::write_zip(p, files, kBuildTime);
    return p;
  }
  TempDir dir_;
  fs::path good_;
  std::vector<wheel::WheelFile> files_;
};

TEST_F(WheelVerify, GoodWheelHasNoProblems) {
  auto problems = wheel::verify_wheel(good_);
  EXPECT_TRUE(problems.empty()) << problems_text(problems);
}

TEST_F(WheelVerify, OneChangedByteInAMemberIsReportedNamingTheFile) {
  auto files = files_;
  auto it = std::find_if(files.begin(), files.end(), [](const wheel::WheelFile& f) {
    return f.path.find("axpy_dtype_f32.fatbin") != std::string::npos;
  });
  ASSERT_NE(it, files.end());
  it->data[0] ^= 1;  // RECORD is kept as it was
  auto problems = wheel::verify_wheel(rewrite(files));
  ASSERT_EQ(problems.size(), 1u) << problems_text(problems);
  EXPECT_NE(problems[0].file.find(it->path), std::string::npos) << problems[0].file;
  EXPECT_NE(problems[0].what.find("RECORD says " + wheel::record_hash("f32-image-sm_90a")),
            std::string::npos)
      << problems[0].what;
}

TEST_F(WheelVerify, FlippedByteInTheZipFileIsReported) {
  std::string bytes = test::read_file(good_);
  // Inside the first member's compressed data: the local header is 30 bytes + name + extras.
  bytes[100] ^= 0x40;
  fs::path p = dir_ / "flipped" / whl_name("sm_90a");
  test::write_file(p, bytes);
  EXPECT_FALSE(wheel::verify_wheel(p).empty());
}

TEST_F(WheelVerify, FileNotInRecordAndRecordRowWithoutFileAreReported) {
  auto files = files_;
  files.insert(files.begin() + 1, {"kiln_kernels_cu13_sm90a/extra.py", "print(1)\n"});
  auto gone = std::find_if(files.begin(), files.end(), [](const wheel::WheelFile& f) {
    return f.path.find("axpy_dtype_f16.fatbin") != std::string::npos;
  });
  std::string gone_path = gone->path;
  files.erase(gone);
  auto problems = wheel::verify_wheel(rewrite(files));
  std::string text = problems_text(problems);
  EXPECT_EQ(problems.size(), 2u) << text;
  EXPECT_NE(text.find("extra.py: is not listed in RECORD"), std::string::npos) << text;
  EXPECT_NE(text.find(gone_path + " is listed but not in the wheel"), std::string::npos) << text;
}

TEST_F(WheelVerify, RenamedWheelFileNoLongerMatchesItsDistInfo) {
  fs::path renamed = dir_ / "out" / "kiln_kernels_cu13_sm80-0.1.0-py3-none-any.whl";
  fs::copy_file(good_, renamed);
  auto problems = wheel::verify_wheel(renamed);
  std::string text = problems_text(problems);
  EXPECT_NE(text.find("does not match the file name"), std::string::npos) << text;
  EXPECT_NE(text.find("Name is kiln-kernels-cu13-sm90a"), std::string::npos) << text;
}

TEST_F(WheelVerify, MissingWheelFileAndWrongTagAreReported) {
  auto files = files_;
  auto wheel_file = std::find_if(files.begin(), files.end(), [](const wheel::WheelFile& f) {
    return f.path.size() > 6 && f.path.compare(f.path.size() - 6, 6, "/WHEEL") == 0;
  });
  ASSERT_NE(wheel_file, files.end());
  files.erase(wheel_file);
  std::string text = problems_text(wheel::verify_wheel(rewrite(files)));
  EXPECT_NE(text.find("/WHEEL is missing"), std::string::npos) << text;

  fs::path other_tag =
      dir_ / "tags" /
      ("kiln_kernels_cu13_sm90a-" + std::string(kiln::version()) + "-cp311-none-any.whl");
  fs::create_directories(other_tag.parent_path());
  fs::copy_file(good_, other_tag);
  text = problems_text(wheel::verify_wheel(other_tag));
  EXPECT_NE(text.find("tags py3-none-any differ from the file name's cp311-none-any"),
            std::string::npos)
      << text;
}

TEST_F(WheelVerify, DotDotPathsAreReported) {
  auto files = files_;
  files.insert(files.begin(), {"kiln_kernels_cu13_sm90a/x/../../evil.py", "x"});
  // write_zip refuses such a path itself; a hostile zip is made by hand-editing a good one.
  EXPECT_THROW(rewrite(files), Error);
}

TEST_F(WheelVerify, NotAZipIsOneProblem) {
  fs::path p = dir_ / "junk" / whl_name("sm_90a");
  test::write_file(p, "not a zip at all");
  auto problems = wheel::verify_wheel(p);
  ASSERT_EQ(problems.size(), 1u) << problems_text(problems);
  EXPECT_EQ(problems[0].file, p.string());
}

TEST_F(WheelVerify, WheelManifestsReturnsTheArchiveManifest) {
  auto manifests = wheel::wheel_manifests(good_);
  ASSERT_EQ(manifests.size(), 1u);
  EXPECT_EQ(manifests[0].target, "sm_90a");
  EXPECT_EQ(manifests[0].package_version, kiln::version());
  EXPECT_EQ(manifests[0].artifacts.size(), 2u);
  EXPECT_EQ(manifests[0].build_time, kBuildTime);
}

// ---------------------------------------------------------------- selection and refusals

TEST(WheelSelect, OnlyTheChosenTargetsGetWheels) {
  TempDir dir;
  write_dist(dir / "dist", {"sm_80", "sm_90a", "compute_80"});
  auto r = test::run(cli("wheel --dist " + (dir / "dist").string() +
                         " --targets sm_90a,compute_80 --out " + (dir / "out").string()));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(
      files_in(dir / "out"),
      (std::vector<std::string>{package_whl_name(), whl_name("compute_80"), whl_name("sm_90a")}));
  EXPECT_NE(r.out.find("wheel sm_90a: " + whl_name("sm_90a") + " ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("wheel package: " + package_whl_name() + " ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("3 wheels written to"), std::string::npos) << r.out;
}

TEST(WheelSelect, TargetNotInTheIndexIsNotFoundNamingWhatTheIndexHas) {
  TempDir dir;
  write_dist(dir / "dist", {"sm_80", "sm_90a"});
  wheel::BuildOptions o;
  o.dist = dir / "dist";
  o.out = dir / "out";
  o.targets = {"sm_90a", "sm_75"};
  try {
    wheel::build_wheels(o);
    FAIL() << "expected Error{NotFound}";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::NotFound);
    std::string msg = e.what();
    EXPECT_NE(msg.find("target sm_75 not in"), std::string::npos) << msg;
    EXPECT_NE(msg.find("which lists sm_80, sm_90a"), std::string::npos) << msg;
  }
  EXPECT_FALSE(fs::exists(dir / "out"));  // nothing written, not even the directory

  auto r = test::run(cli("wheel --dist " + (dir / "dist").string() + " --targets sm_75 --out " +
                         (dir / "out").string()));
  EXPECT_EQ(r.exit_code, 6) << r.out;
  EXPECT_NE(r.out.find("not-found"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sm_75"), std::string::npos) << r.out;
}

TEST(WheelSelect, MalformedTargetIsUsage) {
  TempDir dir;
  write_dist(dir / "dist", {"sm_80"});
  auto r = test::run(cli("wheel --dist " + (dir / "dist").string() + " --targets sm80 --out " +
                         (dir / "out").string()));
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("'sm80' is not a target"), std::string::npos) << r.out;
}

TEST(WheelSelect, MissingDistIsNotFound) {
  TempDir dir;
  auto r = test::run(
      cli("wheel --dist " + (dir / "nope").string() + " --out " + (dir / "out").string()));
  EXPECT_EQ(r.exit_code, 6) << r.out;
  EXPECT_NE(r.out.find((dir / "nope").string()), std::string::npos) << r.out;
}

TEST(WheelRefuse, TamperedArchiveGetsNoWheelAndTheOthersGoOn) {
  TempDir dir;
  write_dist(dir / "dist", {"sm_80", "sm_90a"});
  // Same name, other bytes: the index's sha256 no longer matches.
  format::write_archive(dir / "dist" / format::archive_file_name("kiln-kernels", kiln::version(), "13.0", "sm_90a"),
                members_for("sm_90a", {{"axpy_dtype_f32", "evil"}}), kBuildTime);
  auto r = test::run(
      "(" +
      cli("wheel --json --dist " + (dir / "dist").string() + " --out " + (dir / "out").string()) +
      " 2>/dev/null)");  // progress lines on stderr stay out of the JSON
  EXPECT_EQ(r.exit_code, 3) << r.out;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["wheels"].size(), 2u) << r.out;
  EXPECT_EQ(j["wheels"][0]["wheel"], "package");
  EXPECT_EQ(j["wheels"][1]["target"], "sm_80");
  ASSERT_EQ(j["failed"].size(), 1u) << r.out;
  EXPECT_EQ(j["failed"][0]["target"], "sm_90a");
  EXPECT_EQ(j["failed"][0]["kind"], "integrity");
  EXPECT_NE(j["failed"][0]["message"].get<std::string>().find(
                format::index_file_name("kiln-kernels", kiln::version()) + " says"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(files_in(dir / "out"),
            (std::vector<std::string>{package_whl_name(), whl_name("sm_80")}));  // no temp
}

TEST(WheelRefuse, ArchiveWhoseMemberDiffersFromItsManifestIsIntegrity) {
  TempDir dir;
  write_dist(dir / "dist", {"sm_80"});
  // Re-pin the index to a corrupt archive: the index matches, the manifest does not.
  auto members = members_for("sm_80");
  members[1].data[0] ^= 1;
  std::string name = format::archive_file_name("kiln-kernels", kiln::version(), "13.0", "sm_80");
  format::write_archive(dir / "dist" / name, members, kBuildTime);
  format::Index idx = format::parse_index(
      test::read_file(dir / "dist" / format::index_file_name("kiln-kernels", kiln::version())), "i");
  std::size_t size = 0;
  idx.archives[0].sha256 = io::sha256_file(dir / "dist" / name, &size);
  idx.archives[0].size = size;
  test::write_file(dir / "dist" / format::index_file_name("kiln-kernels", kiln::version()),
                   format::index_to_json(idx));
  wheel::BuildOptions o;
  o.dist = dir / "dist";
  o.out = dir / "out";
  auto result = wheel::build_wheels(o);
  ASSERT_EQ(result.wheels.size(), 1u);  // the package's own wheel only
  EXPECT_EQ(result.wheels[0].target, "");
  ASSERT_EQ(result.failed.size(), 1u);
  EXPECT_EQ(result.failed[0].kind, ErrorKind::Integrity);
  EXPECT_NE(result.failed[0].message.find(members[1].name), std::string::npos)
      << result.failed[0].message;
  EXPECT_EQ(files_in(dir / "out"), std::vector<std::string>{package_whl_name()});
}

TEST(WheelBuild, PackageWheelCarriesThePinnedDescriptionAndReadsBack) {
  TempDir dir;
  write_dist(dir / "dist", {"sm_80"});
  wheel::BuildOptions o;
  o.dist = dir / "dist";
  o.out = dir / "out";
  auto result = wheel::build_wheels(o);
  ASSERT_TRUE(result.failed.empty());
  const fs::path whl = dir / "out" / package_whl_name();
  EXPECT_TRUE(wheel::verify_wheel(whl).empty()) << problems_text(wheel::verify_wheel(whl));
  EXPECT_TRUE(wheel::wheel_manifests(whl).empty());  // no GPU code
  auto pw = wheel::read_package_wheel(whl);
  ASSERT_TRUE(pw.has_value());
  EXPECT_EQ(pw->package, "kiln-kernels");
  EXPECT_EQ(pw->version, wheel::pep440_version(kiln::version()));
  EXPECT_EQ(pw->runtime_requirement, wheel::runtime_requirement(kiln::version()));
  EXPECT_EQ(pw->description, reference_description());
  EXPECT_EQ(pw->description_path,
            "kiln_kernels/" + format::description_file_name("kiln-kernels", kiln::version()));
  // A target wheel is not a package wheel.
  EXPECT_FALSE(wheel::read_package_wheel(dir / "out" / whl_name("sm_80")).has_value());
}

TEST(WheelRefuse, ADescriptionOtherThanThePinnedOneGetsNoPackageWheel) {
  TempDir dir;
  write_dist(dir / "dist", {"sm_80"});
  test::write_file(dir / "dist" / format::description_file_name("kiln-kernels", kiln::version()),
                   reference_description() + " ");
  wheel::BuildOptions o;
  o.dist = dir / "dist";
  o.out = dir / "out";
  auto result = wheel::build_wheels(o);
  ASSERT_EQ(result.failed.size(), 2u);  // the target wheel carries the description too
  EXPECT_EQ(result.failed[0].target, "");
  EXPECT_EQ(result.failed[0].kind, ErrorKind::Integrity);
  EXPECT_CONTAINS(result.failed[0].message, format::description_file_name("kiln-kernels", kiln::version()));
  EXPECT_FALSE(fs::exists(dir / "out" / package_whl_name()));
}

TEST(WheelRefuse, AnIndexPinningNoDescriptionGetsTargetWheelsAndAPackageWheelFailure) {
  TempDir dir;
  test::write_release_dist(dir / "dist", release(), {"sm_80"});  // not described
  auto r = test::run(
      "(" +
      cli("wheel --json --dist " + (dir / "dist").string() + " --out " + (dir / "out").string()) +
      " 2>/dev/null)");
  EXPECT_EQ(r.exit_code, 6) << r.out;  // not-found: nothing to make the package wheel of
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["failed"].size(), 1u) << r.out;
  EXPECT_EQ(j["failed"][0]["wheel"], "package");
  EXPECT_CONTAINS(j["failed"][0]["message"].get<std::string>(), "pins no package description");
  EXPECT_EQ(files_in(dir / "out"), std::vector<std::string>{whl_name("sm_80")});
}

TEST(WheelCli, JsonListsEachWheelWithItsDigest) {
  TempDir dir;
  write_dist(dir / "dist", {"sm_80", "sm_90a"});
  auto r = test::run(
      "(" +
      cli("wheel --json --dist " + (dir / "dist").string() + " --out " + (dir / "out").string()) +
      " 2>/dev/null)");  // progress lines on stderr stay out of the JSON
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["wheels"].size(), 3u);
  EXPECT_EQ(j["wheels"][0]["wheel"], "package");
  EXPECT_TRUE(j["wheels"][0]["target"].is_null());
  for (const auto& w : j["wheels"]) {
    fs::path f = w["file"].get<std::string>();
    EXPECT_EQ(f.filename().string(), w["target"].is_null()
                                         ? package_whl_name()
                                         : whl_name(w["target"].get<std::string>()));
    EXPECT_EQ(w["sha256"], io::sha256_file(f));
    EXPECT_EQ(w["size"], fs::file_size(f));
    EXPECT_TRUE(wheel::verify_wheel(f).empty());
  }
  EXPECT_TRUE(j["failed"].empty());
}

}  // namespace
}  // namespace kiln
