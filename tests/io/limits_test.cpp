// Hostile bytes against the limits of docs/security.md (issue 12 items 3, 6, 7, 8): deep JSON,
// decompression bombs, kill -9 during unpack, numbers out of range, FIFOs and devices where a
// file is expected, path-like --version values. Each case asserts what a user notices: the
// error kind and exit code, what the message names, memory used, files left behind.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "format/archive.hpp"
#include "format/manifest.hpp"
#include "format/untrusted_json.hpp"
#include "io/atomic_file.hpp"
#include "io/limits.hpp"
#include "io/sha256.hpp"
#include "kiln/version.hpp"
#include "plan/resolver.hpp"
#include "store/store.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

std::string cli(const std::string& args) { return test::kiln_cli() + " " + args; }

std::string deep(std::size_t levels) { return std::string(levels, '[') + std::string(levels, ']'); }

// One artifact whose size and digest are what the test claims, not those of any bytes.
format::Manifest one_artifact_manifest(const std::string& file, std::uint64_t size,
                               const std::string& sha256) {
  test::ReleaseSpec rel;
  rel.cuda_version = "13.0";
  rel.with_artifacts({{file.substr(0, file.find('.')), ""}});
  format::Manifest m = test::release_manifest(rel, "sm_80");
  m.artifacts[0].file = file;
  m.artifacts[0].size = size;
  m.artifacts[0].sha256 = sha256;
  return m;
}

// A manifest whose package_version is `levels` arrays deep: the shape of the attack run's files.
std::string deep_manifest_text(std::size_t levels) {
  std::string m = format::manifest_to_json(one_artifact_manifest("a.fatbin", 1, io::sha256_hex("x")));
  std::string key = std::string("\"package_version\": \"") + kiln::version() + "\"";
  m.replace(m.find(key), key.size(), "\"package_version\": " + deep(levels));
  return m;
}

// --- item 3: deep JSON --------------------------------------------------------------------------

TEST(UntrustedJson, NestingIsCountedOutsideStringsOnly) {
  EXPECT_FALSE(format::find_excess_nesting("{\"a\": \"[[[[[[[[[[\"}", 2));
  EXPECT_FALSE(format::find_excess_nesting("{\"a\": [1, {\"b\": 2}]}", 3));
  EXPECT_EQ(format::find_excess_nesting("{\"a\": [1, {\"b\": 2}]}", 2), std::optional<std::size_t>(10));
  // An escaped quote does not end the string.
  EXPECT_FALSE(format::find_excess_nesting("[\"\\\"[[[[\"]", 1));
}

TEST(UntrustedJson, HundredThousandLevelsInManifestAndIndexAreLimitErrorsNotCrashes) {
  try {
    format::parse_manifest(deep_manifest_text(100000), "evil/manifest.json");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Limit);
    EXPECT_NE(std::string(e.what()).find("evil/manifest.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("deeper than the limit of 64"), std::string::npos);
  }
  try {
    format::parse_index(
        "{\"format\": \"kiln-index\", \"format_version\": 1, \"archives\": " + deep(100000) + "}",
        "evil-index.json");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Limit);
    EXPECT_NE(std::string(e.what()).find("evil-index.json"), std::string::npos) << e.what();
  }
}

TEST(UntrustedJson, ErrorMessagesDescribeContainersInsteadOfDumpingThem) {
  // 60 levels pass the depth limit; the message must still not carry the whole value.
  std::string m = format::manifest_to_json(one_artifact_manifest("a.fatbin", 1, io::sha256_hex("x")));
  std::string key = "\"build_time\": 1764403200";
  m.replace(m.find(key), key.size(), "\"build_time\": " + deep(60));
  try {
    format::parse_manifest(m, "m.json");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Format);
    std::string msg = e.what();
    EXPECT_NE(msg.find("field 'build_time'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("an array of 1 elements"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("[["), std::string::npos) << msg;
  }
  // A long string is cut.
  std::string longval = std::string(5000, 'z');
  std::string idx = "{\"format\": \"kiln-index\", \"format_version\": \"" + longval + "\"}";
  try {
    format::parse_index(idx, "i.json");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Format);
    EXPECT_LT(std::string(e.what()).size(), 400u) << e.what();
    EXPECT_NE(std::string(e.what()).find("zzz..."), std::string::npos) << e.what();
  }
}

TEST(UntrustedJson, JsonAboveTheSizeLimitIsRefusedBeforeParsing) {
  try {
    format::check_json_bounds(std::string(100, ' '), "big.json", 99);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Limit);
    EXPECT_NE(std::string(e.what()).find("big.json: JSON is 100 bytes, more than the limit of 99"),
              std::string::npos)
        << e.what();
  }
}

TEST(LimitsCli, DeepIndexIsRefusedByVerifyInspectInstallAndPinnedFetchWithExit12) {
  TempDir dir;
  std::string text =
      "{\"format\": \"kiln-index\", \"format_version\": 1, \"package_version\": " + deep(100000) +
      "}\n";
  fs::path idx = dir / "mirror" / format::index_file_name("kiln-kernels", kiln::version());
  test::write_file(idx, text);
  for (const std::string& cmd :
       {"verify " + idx.string(), "inspect " + idx.string(),
        "install " + idx.string() + " --dest " + (dir / "store").string(),
        "fetch --targets sm_80 --dest " + (dir / "fstore").string() + " --mirror file://" +
            (dir / "mirror").string() + " --index-sha256 " + io::sha256_hex(text)}) {
    auto r = test::run(cli(cmd));
    EXPECT_EQ(r.exit_code, 12) << cmd << "\n" << r.out;
    EXPECT_NE(r.out.find("error (limit)"), std::string::npos) << cmd << "\n" << r.out;
    EXPECT_NE(r.out.find("nests deeper than the limit of 64"), std::string::npos) << r.out;
  }
  EXPECT_FALSE(
      fs::exists(dir / "fstore" / format::archive_stem("kiln-kernels", kiln::version(), "13.0", "sm_80")));
}

TEST(LimitsCli, DeepManifestInsideAnArchiveIsRefusedByVerifyInspectInstall) {
  TempDir dir;
  fs::path a = dir / "deep.tar.zst";
  format::write_archive(a, {{"manifest.json", deep_manifest_text(100000)}, {"a.fatbin", "x"}}, 0);
  for (const std::string& cmd : {"verify " + a.string(), "inspect " + a.string(),
                                 "install " + a.string() + " --dest " + (dir / "s").string()}) {
    auto r = test::run(cli(cmd));
    EXPECT_EQ(r.exit_code, 12) << cmd << "\n" << r.out;
    EXPECT_NE(r.out.find(a.string() + ":manifest.json"), std::string::npos) << cmd << r.out;
  }
  // A store whose manifest.json is the deep one: scanned, reported, no crash.
  fs::path sd = dir / "store" / format::archive_stem("kiln-kernels", kiln::version(), "13.0", "sm_80");
  test::write_file(sd / "manifest.json", deep_manifest_text(100000));
  auto r = test::run(cli("verify " + (dir / "store").string()));
  EXPECT_EQ(r.exit_code, 12) << r.out;
  EXPECT_NE(r.out.find((sd / "manifest.json").string()), std::string::npos) << r.out;
}

// --- item 8: 1e999, install message, --version ---------------------------------------------------

TEST(LimitsCli, FormatVersionOutOfRangeIsAFormatErrorExit10) {
  TempDir dir;
  test::write_file(dir / "i.json", "{\"format\": \"kiln-index\", \"format_version\": 1e999}\n");
  auto r = test::run(cli("verify " + (dir / "i.json").string()));
  EXPECT_EQ(r.exit_code, 10) << r.out;
  EXPECT_NE(r.out.find("FAIL (format)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1e999"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find((dir / "i.json").string()), std::string::npos) << r.out;
  try {
    format::parse_manifest("{\"format\": \"kiln-manifest\", \"format_version\": 1e999}", "m.json");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Format);
    EXPECT_NE(std::string(e.what()).find("m.json"), std::string::npos) << e.what();
  }
}

TEST(LimitsCli, InstallFailurePrintsTheDocumentedErrorLine) {
  TempDir dir;
  auto r = test::run(
      cli("install " + (dir / "missing.tar.zst").string() + " --dest " + (dir / "s").string()));
  EXPECT_EQ(r.exit_code, 6) << r.out;
  EXPECT_NE(r.out.find("kiln: error (not-found): "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("install failed"), std::string::npos) << r.out;
}

TEST(LimitsCli, PathLikeVersionIsRefusedByEveryCommandTakingVersion) {
  TempDir dir;
  const std::string bad = " --version ../../etc/x";
  for (const std::string& cmd :
       {"fetch --targets sm_80 --dest " + dir.path().string() + bad,
        "mirror stage --from " + dir.path().string() + " --to " + (dir / "m").string() + bad,
        "mirror verify " + dir.path().string() + bad,
        "mirror sync --from " + dir.path().string() + " " + (dir / "m").string() + bad,
        "tarball --out " + (dir / "t").string() + bad}) {
    auto r = test::run(cli(cmd));
    EXPECT_EQ(r.exit_code, 2) << cmd << "\n" << r.out;
    EXPECT_NE(r.out.find("'../../etc/x' is not a release version"), std::string::npos)
        << cmd << "\n"
        << r.out;
  }
  EXPECT_TRUE(format::is_package_version("0.1.0"));
  EXPECT_TRUE(format::is_package_version("0.2.0-rc1"));
  EXPECT_FALSE(format::is_package_version("../../etc/x"));
  EXPECT_FALSE(format::is_package_version("0.1"));
  EXPECT_FALSE(format::is_package_version("0.1.0-"));
}

// --- item 8: bounded local reads ----------------------------------------------------------------

TEST(LocalReads, FifoAndDevZeroAreRefusedWithoutBlocking) {
  TempDir dir;
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0644), 0);
  fs::create_symlink("/dev/zero", dir / "zero");
  plan::StoreScanner disk;
  for (const char* name : {"fifo", "zero"}) {
    for (int via = 0; via < 3; ++via) {
      try {
        if (via == 0)
          io::read_whole_file(dir / name);
        else if (via == 1)
          disk.read_file((dir / name).string());
        else
          io::sha256_file(dir / name);
        ADD_FAILURE() << name << " was read";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::Io) << e.what();
        EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
      }
    }
  }
  test::write_file(dir / "f", std::string(11, 'x'));
  try {
    io::read_whole_file(dir / "f", 10);
    ADD_FAILURE() << "read past the limit";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Limit);
    EXPECT_NE(std::string(e.what()).find("11 bytes, more than the limit of 10"), std::string::npos);
  }
  EXPECT_EQ(io::read_whole_file(dir / "f", 11), std::string(11, 'x'));
}

TEST(LocalReads, StoreManifestThatIsAFifoOrDevZeroIsReportedNotRead) {
  TempDir dir;
  fs::path sd = dir / "store" / format::archive_stem("kiln-kernels", kiln::version(), "13.0", "sm_80");
  fs::create_directories(sd);
  ASSERT_EQ(::mkfifo((sd / "manifest.json").c_str(), 0644), 0);
  fs::path sd2 = dir / "store" / format::archive_stem("kiln-kernels", kiln::version(), "13.0", "sm_90a");
  fs::create_directories(sd2);
  fs::create_symlink("/dev/zero", sd2 / "manifest.json");
  // `timeout`: a blocking open on the FIFO would hang here (exit 124) rather than fail.
  auto r = test::run("timeout 60 " + cli("verify " + (dir / "store").string()));
  EXPECT_EQ(r.exit_code, 9) << r.out;
  EXPECT_NE(r.out.find((sd / "manifest.json").string() + ": not a regular file"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find((sd2 / "manifest.json").string() + ": not a regular file"),
            std::string::npos)
      << r.out;
}

// --- item 6: decompression bombs ----------------------------------------------------------------

// One ustar header, by hand: the declared size is whatever the attacker writes.
std::string ustar_header(const std::string& name, std::uint64_t size) {
  std::string h(512, '\0');
  std::memcpy(&h[0], name.data(), name.size());
  std::snprintf(&h[100], 8, "%07o", 0644);
  std::snprintf(&h[108], 8, "%07o", 0);
  std::snprintf(&h[116], 8, "%07o", 0);
  std::snprintf(&h[124], 12, "%011llo", static_cast<unsigned long long>(size));
  std::snprintf(&h[136], 12, "%011o", 0);
  h[156] = '0';
  std::memcpy(&h[257], "ustar", 6);
  std::memcpy(&h[263], "00", 2);
  std::memset(&h[148], ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  std::snprintf(&h[148], 8, "%06o", sum);
  return h;
}

std::string tar_member(const std::string& name, const std::string& data) {
  std::string out = ustar_header(name, data.size()) + data;
  out.resize((out.size() + 511) / 512 * 512, '\0');
  return out;
}

// Runs `kiln <args>` in a child and returns its exit code and peak RSS in KiB.
std::pair<int, long> run_measured(const std::vector<std::string>& args) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    std::vector<char*> argv;
    std::string bin = test::kiln_cli();
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  int status = 0;
  struct rusage ru {};
  ::wait4(pid, &status, 0, &ru);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ru.ru_maxrss};
}

TEST(ArchiveBomb, MemberHeaderDeclaring4GiBIsRefusedBeforeItsDataIsRead) {
  TempDir dir;
  std::uint64_t four_gib = std::uint64_t{4} << 30;
  // The manifest pins a small artifact; the tar header of the member claims 4 GiB, followed by
  // 1 MiB of its zeros (the reader must refuse at the header, so the rest is never needed).
  std::string manifest = format::manifest_to_json(one_artifact_manifest("big.fatbin", 1, io::sha256_hex("x")));
  std::string tar = tar_member("manifest.json", manifest) + ustar_header("big.fatbin", four_gib) +
                    std::string(1 << 20, '\0');
  test::write_file(dir / "bomb.tar", tar);
  ASSERT_EQ(test::run("zstd -q -1 " + (dir / "bomb.tar").string() + " -o " +
                      (dir / "bomb.tar.zst").string())
                .exit_code,
            0);
  fs::path bomb = dir / "bomb.tar.zst";
  auto r = test::run(cli("verify " + bomb.string()));
  EXPECT_EQ(r.exit_code, 12) << r.out;
  EXPECT_NE(r.out.find("archive " + bomb.string() + ": member 'big.fatbin': declared size " +
                       std::to_string(four_gib) + " exceeds the limit of " +
                       std::to_string(io::limits::kMaxMemberBytes)),
            std::string::npos)
      << r.out;
  r = test::run(cli("install " + bomb.string() + " --dest " + (dir / "store").string()));
  EXPECT_EQ(r.exit_code, 12) << r.out;
  EXPECT_TRUE(store::scan_store(dir / "store").empty());
  for (const auto& e : fs::directory_iterator(dir / "store"))
    EXPECT_EQ(e.path().filename(), ".kiln-locks") << "left behind: " << e.path();
}

TEST(ArchiveBomb, ManifestDeclaringMoreThanTheLimitsIsRefusedFromTheManifestAlone) {
  TempDir dir;
  // Only the manifest is in the archive: the refusal must come from what it declares.
  std::string manifest = format::manifest_to_json(
      one_artifact_manifest("big.fatbin", std::uint64_t{4} << 30, std::string(64, 'a')));
  format::write_archive(dir / "m.tar.zst", {{"manifest.json", manifest}}, 0);
  auto r = test::run(cli("verify " + (dir / "m.tar.zst").string()));
  EXPECT_EQ(r.exit_code, 12) << r.out;
  EXPECT_NE(r.out.find((dir / "m.tar.zst").string() +
                       ":manifest.json: artifact 'big.fatbin' declares 4294967296 bytes"),
            std::string::npos)
      << r.out;
}

// A real archive holding a 384 MiB artifact (zeros: a few hundred KiB compressed) that its
// manifest pins correctly: verify and install stream it, so peak RSS stays far below its size.
// The bound on peak RSS: a small fraction of the artifact (measured: ~16 MiB in a plain build).
// Under AddressSanitizer the children run with a small quarantine (freed chunks would otherwise
// be held up to 256 MiB) and still peak near 175 MiB (shadow memory and allocator overhead), so
// the bound there is only "less than the 384 MiB artifact": the plain build holds the tight one.
#if defined(__SANITIZE_ADDRESS__)
constexpr long kStreamRssBoundKib = 256 * 1024;
#else
constexpr long kStreamRssBoundKib = 64 * 1024;
#endif

TEST(ArchiveBomb, LargeArtifactIsStreamedWithSmallPeakMemory) {
  TempDir dir;
  const std::uint64_t size = std::uint64_t{384} << 20;
  io::Sha256 h;
  std::string chunk(1 << 20, '\0');
  for (std::uint64_t i = 0; i < size / chunk.size(); ++i) h.update(chunk);
  std::string manifest = format::manifest_to_json(one_artifact_manifest("big.fatbin", size, h.hex()));
  // tar | zstd, streamed: the test itself never holds the member either.
  std::string tar_head = tar_member("manifest.json", manifest) + ustar_header("big.fatbin", size);
  test::write_file(dir / "head", tar_head);
  std::string cmd = "(cat " + (dir / "head").string() + "; head -c " + std::to_string(size) +
                    " /dev/zero; head -c 1024 /dev/zero) | zstd -q -1 -o " +
                    (dir / "big.tar.zst").string();
  ASSERT_EQ(test::run(cmd).exit_code, 0);
  EXPECT_LT(fs::file_size(dir / "big.tar.zst"), std::uintmax_t{1} << 20);
#if defined(__SANITIZE_ADDRESS__)
  const char* asan = std::getenv("ASAN_OPTIONS");
  ::setenv(
      "ASAN_OPTIONS",
      ((asan && *asan ? std::string(asan) + ":" : std::string()) + "quarantine_size_mb=8").c_str(),
      1);
#endif
  auto [rc, rss_kib] = run_measured({"verify", (dir / "big.tar.zst").string()});
  EXPECT_EQ(rc, 0);
  EXPECT_LT(rss_kib, kStreamRssBoundKib) << "verify peaked at " << rss_kib << " KiB";
  auto [rc2, rss2] =
      run_measured({"install", (dir / "big.tar.zst").string(), "--dest", (dir / "store").string()});
  EXPECT_EQ(rc2, 0);
  EXPECT_LT(rss2, kStreamRssBoundKib) << "install peaked at " << rss2 << " KiB";
  EXPECT_EQ(
      fs::file_size(dir / "store" / format::archive_stem("kiln-kernels", kiln::version(), "13.0", "sm_80") /
                    "big.fatbin"),
      size);
}

// --- item 7: kill -9 during unpack --------------------------------------------------------------

bool has_temp_dir(const fs::path& store) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(store, ec))
    if (e.path().filename().string().rfind(".tmp-", 0) == 0) return true;
  return false;
}

TEST(InstallKill, SigkillMidUnpackLeavesNothingTheNextInstallDoesNotRemove) {
  TempDir dir;
  // Many members, each fsync'ed on unpack: slow enough to be caught in the middle.
  std::vector<test::SyntheticArtifact> arts;
  for (int i = 0; i < 40; ++i)
    arts.push_back({"k" + std::to_string(100 + i), test::random_bytes(2 << 20, 7 + i)});
  test::ReleaseSpec rel;
  rel.with_artifacts(std::move(arts));
  std::vector<format::ArchiveMember> members = test::release_members(rel, "sm_80");
  format::write_archive(dir / "big.tar.zst", members, 0, 1);
  members.clear();
  fs::path store = dir / "store";
  fs::create_directories(store);

  pid_t pid = ::fork();
  if (pid == 0) {
    int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    std::string bin = test::kiln_cli();
    ::execl(bin.c_str(), bin.c_str(), "install", (dir / "big.tar.zst").c_str(), "--dest",
            store.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!has_temp_dir(store) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the install finished before it could be killed";
  ASSERT_TRUE(has_temp_dir(store)) << "killed before it started unpacking";
  // Readers never take the half-unpacked directory for an archive.
  EXPECT_TRUE(store::scan_store(store).empty());

  // The next install (of anything) removes what the dead installer left.
  format::write_archive(
      dir / "small.tar.zst",
      {{"manifest.json", format::manifest_to_json(one_artifact_manifest("s.fatbin", 1, io::sha256_hex("s")))},
       {"s.fatbin", "s"}},
      0);
  auto r =
      test::run(cli("install " + (dir / "small.tar.zst").string() + " --dest " + store.string()));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_FALSE(has_temp_dir(store));
  for (const auto& e : fs::directory_iterator(store)) {
    std::string name = e.path().filename().string();
    EXPECT_TRUE(name == ".kiln-locks" ||
                name == format::archive_stem("kiln-kernels", kiln::version(), "13.0", "sm_80"))
        << "left behind: " << name;
  }
  EXPECT_EQ(store::scan_store(store).size(), 1u);
}

}  // namespace
}  // namespace kiln
