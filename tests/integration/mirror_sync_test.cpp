// `kiln mirror sync` over real HTTP on loopback: tests/misbehaving_server/server.py serving a
// staged mirror well, or flipping a byte / truncating the archives, and nginx over HTTPS with a
// CA made here. A failed sync must leave the destination byte-identical and no staging dir.
// Hostile upstreams (issue 12): a forged wheel or tarball with a checksum file rewritten to
// match, a checksum file listing another release's files or an index.html; only what a pin
// covers is published, and `mirror verify` with a pin names what is not covered.
// Needs python3; the nginx test skips without nginx or openssl (scripts/bootstrap.sh).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "child_process.hpp"
#include "format/manifest.hpp"
#include "io/sha256.hpp"
#include "kiln/version.hpp"
#include "mirror/mirror.hpp"
#include "misbehaving_server.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"
#include "wheel/wheel.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::read_file;
using test::TempDir;
using test::write_file;
using Json = nlohmann::json;

const std::string kVer = kiln::version();
// The server's --match for the per-target archives only (tarballs end in .tar.zst too); passed
// as --match=VALUE since argparse takes a separate "-..." for an option.
const std::string kArchiveMatch = "-cuda13.0-sm_";

const std::string kWheel = "kiln_kernels_cu13_sm90a-" + kVer + "-py3-none-any.whl";
const std::string kTarball = "kiln-" + kVer + "-cuda13.0-linux-x86_64.tar.zst";

// A release staged into `mirror` by `kiln mirror stage`'s library half: index, two archives
// with fake fatbins (the shared fixture, synthetic_release.hpp), a wheel and a tarball (opaque
// bytes). Returns the index digest. `seed` changes the fatbin bytes (a forger's release).
std::string make_mirror(const fs::path& dist, const fs::path& mirror, unsigned seed = 7) {
  test::ReleaseSpec rel;
  rel.version = kVer;
  rel.cuda_version = "13.0";
  rel.zstd_level = 3;
  rel.artifacts = [seed](const std::string& target) {
    return std::vector<test::SyntheticArtifact>{
        {"axpy_dtype_f32", test::random_bytes(50000, seed * 2 + (target == "sm_90a" ? 1 : 0))}};
  };
  test::SyntheticDist d = test::write_release_dist(dist, rel, {"sm_80", "sm_90a"});
  // A real wheel of the sm_90a archive: stage and sync check its RECORD.
  wheel::write_zip(dist / kWheel,
                   wheel::wheel_contents(test::release_manifest(rel, "sm_90a"),
                                         test::release_members(rel, "sm_90a"), kVer),
                   rel.build_time);
  write_file(dist / kTarball, "tarball-bytes");
  mirror::StageOptions so;
  so.sources = {dist};
  so.to = mirror;
  so.package = "kiln-kernels";
  so.version = kVer;
  mirror::stage_release(so);
  return d.index_sha256;
}

std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    out[fs::relative(e.path(), dir).string()] =
        e.is_regular_file() ? io::sha256_file(e.path()) : "<dir>";
  return out;
}

// The forger's move: put `files` (name -> bytes) into the upstream and rewrite its checksum
// file to match, so that upstream is consistent with itself. Returns the new checksum file.
std::string forge(const fs::path& upstream, const std::map<std::string, std::string>& files) {
  const std::string sums = mirror::checksums_file_name("kiln-kernels", kVer);
  auto entries = mirror::parse_checksums(read_file(upstream / sums), sums, sums);
  for (const auto& [name, bytes] : files) {
    write_file(upstream / name, bytes);
    entries.erase(std::remove_if(entries.begin(), entries.end(),
                                 [&](const mirror::ChecksumEntry& e) { return e.name == name; }),
                  entries.end());
    entries.push_back({name, io::sha256_hex(bytes)});
  }
  std::string text = mirror::checksums_to_text(entries);
  write_file(upstream / sums, text);
  return text;
}

// The 1-based line of `name` in a checksum file.
std::size_t line_of(const std::string& sums_text, const std::string& name) {
  std::size_t line = 1;
  for (std::size_t pos = 0; pos < sums_text.size(); ++line) {
    std::size_t nl = sums_text.find('\n', pos);
    if (sums_text.compare(pos + 66, nl - pos - 66, name) == 0) return line;
    pos = nl + 1;
  }
  return 0;
}

bool has_staging_dir(const fs::path& dir) {
  if (!fs::exists(dir)) return false;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(".kiln-sync-", 0) == 0) return true;
  return false;
}

using test::free_port;

bool have_tool(const std::string& tool) {
  return test::run("command -v " + tool + " >/dev/null").exit_code == 0;
}

using test::Child;

using Server = test::MisbehavingServer;

class MirrorSyncHttp : public ::testing::Test {
 protected:
  void SetUp() override {
    index_sha = make_mirror(tmp / "dist", tmp / "upstream");
    sums_sha = io::sha256_file(tmp / "upstream" / mirror::checksums_file_name("kiln-kernels", kVer));
    dest = tmp / "down";
  }
  // Pins: both by default (the whole release covered); a test narrows them with `pins`.
  test::RunResult sync(const std::string& from, const std::string& extra = "") {
    return test::run(test::kiln_cli() + " mirror sync --json --retries 2 --retry-base-ms 50 " +
                     "--connect-timeout-ms 2000 --low-speed-seconds 3 --from " + from + " --to " +
                     dest.string() + " " + pins() + " " + extra);
  }
  std::string pins() const {
    return (pin_index ? "--index-sha256 " + index_sha : std::string()) +
           (pin_sums ? " --sums-sha256 " + sums_sha : std::string());
  }
  // The destination holds part of a release and an operator's file before a failing sync.
  void prepopulate() {
    fs::create_directories(dest);
    std::string wheel = "kiln_kernels_cu13_sm90a-" + kVer + "-py3-none-any.whl";
    fs::copy_file(tmp / "upstream" / wheel, dest / wheel);
    write_file(dest / "README", "operator notes");
  }
  TempDir tmp;
  fs::path dest;
  std::string index_sha;
  std::string sums_sha;  // of the genuine checksum file, as `kiln mirror stage` printed it
  bool pin_index = true;
  bool pin_sums = true;
};

TEST_F(MirrorSyncHttp, GoodUpstreamCopiesEverythingAndARerunAsksForNoFile) {
  Server s(tmp / "upstream", "ok");
  auto r = sync(s.url());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  Json j = Json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(j["transferred"].size(), 6u) << r.out;
  EXPECT_EQ(snapshot(dest), snapshot(tmp / "upstream"));
  EXPECT_FALSE(has_staging_dir(dest));
  std::string archive = "/" + format::archive_file_name("kiln-kernels", kVer, "13.0", "sm_90a");
  EXPECT_EQ(s.count(archive), 1);

  r = sync(s.url());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  j = Json::parse(r.out.substr(r.out.find('{')));
  EXPECT_TRUE(j["transferred"].empty()) << r.out;
  EXPECT_EQ(j["already_good"].size(), 6u) << r.out;
  EXPECT_EQ(j["bytes_transferred"], 0);
  EXPECT_CONTAINS(r.out, "0 files transferred, 6 already good");
  EXPECT_EQ(s.count(archive), 1);  // only the checksum file and the index asked for again
  EXPECT_EQ(s.count("/" + mirror::checksums_file_name("kiln-kernels", kVer)), 2);
  auto v = test::run(test::kiln_cli() + " mirror verify " + dest.string() + " " + pins());
  EXPECT_EQ(v.exit_code, 0) << v.out;
}

TEST_F(MirrorSyncHttp, FlippedByteLeavesTheDestinationUnchanged) {
  prepopulate();
  auto before = snapshot(dest);
  Server s(tmp / "upstream", "flip", {"--match=" + kArchiveMatch});
  auto r = sync(s.url());
  EXPECT_EQ(r.exit_code, 3) << r.out;
  std::string archive = format::archive_file_name("kiln-kernels", kVer, "13.0", "sm_80");
  EXPECT_CONTAINS(r.out, "kiln: error (integrity): " + archive + ": " + s.url() + "/" + archive +
                             ": sha256 mismatch: expected " +
                             io::sha256_file(tmp / "upstream" / archive));
  EXPECT_CONTAINS(r.out, "Nothing was changed in " + dest.string());
  EXPECT_EQ(snapshot(dest), before);
  EXPECT_FALSE(has_staging_dir(dest));
}

TEST_F(MirrorSyncHttp, TruncatedBodyLeavesTheDestinationUnchanged) {
  prepopulate();
  auto before = snapshot(dest);
  Server s(tmp / "upstream", "truncate", {"--match=" + kArchiveMatch});
  auto r = sync(s.url());
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_CONTAINS(r.out, "size mismatch: the index lists");
  EXPECT_EQ(snapshot(dest), before);
  EXPECT_FALSE(has_staging_dir(dest));
}

TEST_F(MirrorSyncHttp, TruncatedWheelIsCaughtByItsDigest) {
  prepopulate();
  fs::remove(dest / ("kiln_kernels_cu13_sm90a-" + kVer + "-py3-none-any.whl"));
  auto before = snapshot(dest);
  Server s(tmp / "upstream", "truncate", {"--match", ".whl"});
  auto r = sync(s.url());
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_CONTAINS(r.out, ".whl");
  EXPECT_EQ(snapshot(dest), before);
  EXPECT_FALSE(has_staging_dir(dest));
}

TEST_F(MirrorSyncHttp, NotFoundUpstreamIsExitSixNamingTheUrl) {
  Server s(tmp / "upstream", "404");
  auto r = sync(s.url());
  EXPECT_EQ(r.exit_code, 6) << r.out;
  EXPECT_CONTAINS(r.out, "HTTP 404");
  EXPECT_FALSE(fs::exists(dest));
}

TEST_F(MirrorSyncHttp, ServerErrorThenSuccessIsRetried) {
  Server s(tmp / "upstream", "500-then-200");
  auto r = sync(s.url());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_CONTAINS(r.out, "retrying");
  EXPECT_EQ(snapshot(dest), snapshot(tmp / "upstream"));
}

// --- hostile upstreams (issue 12) --------------------------------------------------------------

// A valid wheel of other bytes (its RECORD checks out), listed in a rewritten checksum file.
TEST_F(MirrorSyncHttp, ForgedWheelUnderAnIndexPinIsNotPublished) {
  prepopulate();  // the genuine wheel and an operator's README
  make_mirror(tmp / "evil-dist", tmp / "evil", 99);
  const std::string forged = read_file(tmp / "evil" / kWheel);
  ASSERT_NE(io::sha256_hex(forged), io::sha256_file(dest / kWheel));
  forge(tmp / "upstream", {{kWheel, forged}});
  const auto before = snapshot(dest);
  Server s(tmp / "upstream", "ok");
  pin_sums = false;
  auto r = sync(s.url());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  Json j = Json::parse(r.out.substr(r.out.find('{')));
  ASSERT_EQ(j["withheld"].size(), 2u) << r.out;  // the wheel, and the tarball (also unpinned)
  EXPECT_EQ(j["withheld"][1]["name"], kWheel);
  EXPECT_EQ(j["withheld"][1]["kind"], "wheel");
  EXPECT_CONTAINS(r.out, "kiln mirror sync: not published: " + kWheel + " (wheel): ");
  EXPECT_CONTAINS(j["withheld"][1]["reason"].get<std::string>(), "--sums-sha256");
  EXPECT_EQ(s.count("/" + kWheel), 0);  // not even downloaded
  // The genuine wheel and the README untouched; only the index, the archives and a checksum
  // file listing just those were added.
  auto after = snapshot(dest);
  for (const auto& [name, sha] : before) EXPECT_EQ(after[name], sha) << name;
  const std::string sums = mirror::checksums_file_name("kiln-kernels", kVer);
  std::set<std::string> added;
  for (const auto& [name, sha] : after)
    if (!before.count(name)) added.insert(name);
  EXPECT_EQ(added, (std::set<std::string>{format::archive_file_name("kiln-kernels", kVer, "13.0", "sm_80"),
                                          format::archive_file_name("kiln-kernels", kVer, "13.0", "sm_90a"),
                                          format::index_file_name("kiln-kernels", kVer), sums}));
  EXPECT_EQ(read_file(dest / sums).find(kWheel), std::string::npos) << read_file(dest / sums);
  EXPECT_FALSE(has_staging_dir(dest));
}

TEST_F(MirrorSyncHttp, ForgedTarballUnderAnIndexPinIsNotPublished) {
  forge(tmp / "upstream", {{kTarball, "forged tarball bytes"}});
  Server s(tmp / "upstream", "ok");
  pin_sums = false;
  auto r = sync(s.url());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  Json j = Json::parse(r.out.substr(r.out.find('{')));
  ASSERT_EQ(j["withheld"].size(), 2u) << r.out;
  EXPECT_EQ(j["withheld"][0]["name"], kTarball);
  EXPECT_EQ(j["withheld"][0]["kind"], "tarball");
  EXPECT_CONTAINS(r.out, "kiln mirror sync: not published: " + kTarball + " (tarball): ");
  EXPECT_FALSE(fs::exists(dest / kTarball));
  EXPECT_EQ(s.count("/" + kTarball), 0);
  auto v = test::run(test::kiln_cli() + " mirror verify " + dest.string() + " --index-sha256 " +
                     index_sha);
  EXPECT_EQ(v.exit_code, 0) << v.out;  // what was published is all covered by the pin
}

TEST_F(MirrorSyncHttp, PinnedChecksumFileMismatchRefusesAndLeavesTheDestinationAsItWas) {
  prepopulate();
  make_mirror(tmp / "evil-dist", tmp / "evil", 99);
  const std::string forged_sums =
      forge(tmp / "upstream", {{kWheel, read_file(tmp / "evil" / kWheel)}});
  const auto before = snapshot(dest);
  Server s(tmp / "upstream", "ok");
  auto r = sync(s.url());  // both pins: the genuine release's
  EXPECT_EQ(r.exit_code, 3) << r.out;
  const std::string sums = mirror::checksums_file_name("kiln-kernels", kVer);
  EXPECT_CONTAINS(r.out, "kiln: error (integrity): " + sums + ": " + s.url() + "/" + sums +
                             ": sha256 mismatch: pinned " + sums_sha + " (--sums-sha256), served " +
                             io::sha256_hex(forged_sums));
  EXPECT_CONTAINS(r.out, "Nothing was written to " + dest.string());
  EXPECT_EQ(snapshot(dest), before);
  EXPECT_FALSE(has_staging_dir(dest));
  EXPECT_EQ(s.count("/" + kWheel), 0);
  EXPECT_EQ(s.count("/" + format::index_file_name("kiln-kernels", kVer)), 0);
}

// The 0.1.0 checksum file also lists the index and checksum file of release <ver>-rc1, which
// the destination already holds: they must not be overwritten.
TEST_F(MirrorSyncHttp, ChecksumFileListingAnotherReleasesFilesIsRefusedAndNothingIsWritten) {
  const std::string other_index = format::index_file_name("kiln-kernels", kVer + "-rc1");
  const std::string other_sums = mirror::checksums_file_name("kiln-kernels", kVer + "-rc1");
  fs::create_directories(dest);
  write_file(dest / other_index, "the operator's rc1 index");
  write_file(dest / other_sums, "the operator's rc1 checksums");
  const std::string forged =
      forge(tmp / "upstream", {{other_index, "{\"forged\": 1}"}, {other_sums, "forged sums"}});
  const auto before = snapshot(dest);
  Server s(tmp / "upstream", "ok");
  pin_sums = false;
  auto r = sync(s.url());
  EXPECT_EQ(r.exit_code, 10) << r.out;
  const std::string sums_url = s.url() + "/" + mirror::checksums_file_name("kiln-kernels", kVer);
  // The first such line is named (the checksum file sorts before the index).
  EXPECT_CONTAINS(r.out, "kiln: error (format): " + sums_url + ": line " +
                             std::to_string(line_of(forged, other_sums)) + ": '" + other_sums +
                             "' is not a file of release " + kVer);
  EXPECT_CONTAINS(r.out, "Nothing was written to " + dest.string());
  EXPECT_EQ(snapshot(dest), before);
  EXPECT_EQ(read_file(dest / other_index), "the operator's rc1 index");
  EXPECT_FALSE(has_staging_dir(dest));
  EXPECT_EQ(s.count("/" + other_index), 0);
  EXPECT_EQ(s.count("/" + other_sums), 0);
}

// Even a checksum file the operator pinned may list only files of the release.
TEST_F(MirrorSyncHttp, ChecksumFileListingAnIndexHtmlIsRefusedAndNothingIsWritten) {
  prepopulate();
  write_file(dest / "index.html", "<html>the operator's page</html>");
  const std::string forged = forge(tmp / "upstream", {{"index.html", "<html>forged</html>"}});
  sums_sha = io::sha256_hex(forged);
  const auto before = snapshot(dest);
  Server s(tmp / "upstream", "ok");
  auto r = sync(s.url());
  EXPECT_EQ(r.exit_code, 10) << r.out;
  EXPECT_CONTAINS(r.out, "line " + std::to_string(line_of(forged, "index.html")) +
                             ": 'index.html' is not a file of release " + kVer);
  EXPECT_EQ(snapshot(dest), before);
  EXPECT_EQ(read_file(dest / "index.html"), "<html>the operator's page</html>");
  EXPECT_FALSE(has_staging_dir(dest));
  EXPECT_EQ(s.count("/index.html"), 0);
}

// What the attack run saw: `mirror verify --index-sha256 PIN` called a forged mirror OK.
TEST_F(MirrorSyncHttp, VerifyWithAnIndexPinOnAForgedMirrorFailsNamingTheFiles) {
  make_mirror(tmp / "evil-dist", tmp / "evil", 99);
  forge(tmp / "upstream",
        {{kWheel, read_file(tmp / "evil" / kWheel)}, {kTarball, "forged tarball bytes"}});
  const std::string verify = test::kiln_cli() + " mirror verify " + (tmp / "upstream").string();
  auto r = test::run(verify + " --index-sha256 " + index_sha);
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_CONTAINS(r.out, "FAILED " + (tmp / "upstream").string());
  r = test::run(verify + " --json --index-sha256 " + index_sha);
  EXPECT_EQ(r.exit_code, 3) << r.out;
  std::map<std::string, Json> files;
  const Json report = Json::parse(r.out.substr(r.out.find('{')));
  for (const auto& f : report["files"]) files[f["name"].get<std::string>()] = f;
  for (const auto& name : {kWheel, kTarball}) {
    EXPECT_EQ(files[name]["status"], "uncovered") << name;
    EXPECT_EQ(files[name]["error"], "integrity") << name;
  }
  EXPECT_EQ(files[format::index_file_name("kiln-kernels", kVer)]["status"], "ok");
  // With the genuine checksum file pinned as well: that file is named as the forgery.
  r = test::run(verify + " --json --index-sha256 " + index_sha + " --sums-sha256 " + sums_sha);
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_CONTAINS(r.out, "pinned sha256 " + sums_sha + " (--sums-sha256)");
}

// nginx over HTTPS, the CA made here with the openssl CLI.
TEST_F(MirrorSyncHttp, HttpsFromNginxWithTestCa) {
  if (!have_tool("nginx") || !have_tool("openssl") || !have_tool("curl"))
    GTEST_SKIP() << "nginx, openssl or curl is not installed (Debian: nginx-light openssl curl)";
  TempDir ca;
  std::string d = ca.path().string();
  write_file(ca / "ext.cnf", "subjectAltName=IP:127.0.0.1\n");
  std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  auto made = test::run("(cd " + d + " && openssl req -x509 " + ec +
                        " -keyout ca.key -out ca.pem -days 2 -subj '/CN=kiln test CA' && "
                        "openssl req " +
                        ec + " -keyout server.key -out server.csr -subj '/CN=127.0.0.1' && " +
                        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key "
                        "-CAcreateserial -out server.pem -days 2 -extfile ext.cnf) 2>&1");
  ASSERT_EQ(made.exit_code, 0) << made.out;
  TempDir prefix;
  std::string P = prefix.path().string();
  fs::create_directories(prefix / "logs");
  int port = 0;
  std::unique_ptr<Child> nginx;
  for (int attempt = 0; attempt < 3 && !nginx; ++attempt) {
    port = free_port();
    write_file(prefix / "nginx.conf",
               "daemon off;\nmaster_process off;\nworker_processes 1;\nerror_log " + P +
                   "/logs/error.log;\npid " + P + "/logs/nginx.pid;\nevents {}\nhttp {\n" +
                   "  access_log " + P + "/logs/access.log;\n  client_body_temp_path " + P +
                   "/body;\n  proxy_temp_path " + P + "/proxy;\n  fastcgi_temp_path " + P +
                   "/fcgi;\n  uwsgi_temp_path " + P + "/uwsgi;\n  scgi_temp_path " + P +
                   "/scgi;\n  server {\n    listen 127.0.0.1:" + std::to_string(port) +
                   " ssl;\n    ssl_certificate " + d + "/server.pem;\n    ssl_certificate_key " +
                   d + "/server.key;\n    root " + (tmp / "upstream").string() + ";\n  }\n}\n");
    nginx = std::make_unique<Child>(
        std::vector<std::string>{"nginx", "-p", P, "-c", P + "/nginx.conf"}, prefix / "stderr");
    bool up = false;
    for (int i = 0; i < 300 && nginx->running() && !up; ++i) {
      up = test::run("curl -s -o /dev/null --cacert " + d +
                     "/ca.pem https://127.0.0.1:" + std::to_string(port) + "/")
               .exit_code == 0;
      if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!up) nginx.reset();
  }
  ASSERT_TRUE(nginx) << read_file(prefix / "stderr") << read_file(prefix / "logs/error.log");
  std::string url = "https://127.0.0.1:" + std::to_string(port);
  auto r = sync(url);  // no CA given: refused
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_FALSE(fs::exists(dest));
  r = sync(url, "--ca-bundle " + d + "/ca.pem");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(snapshot(dest), snapshot(tmp / "upstream"));
}

}  // namespace
}  // namespace kiln
