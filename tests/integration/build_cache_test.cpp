// kiln build's result cache against a real server and the real nvcc: nginx on loopback with
// WebDAV PUT (Debian nginx-light), which serves Bazel's HTTP cache protocol as bazel-remote
// does: GET/PUT of /ac/<key> and /cas/<sha256>, 404 for what is not there. The lookups (hit,
// miss, a poisoned blob, credentials kept out of messages), then the tiny project built by the
// kiln CLI with no cache, a cold remote cache and, from a copy of the tree at another path, a
// warm one: the same archive and index bytes each time.
// Needs nginx (the tests skip without it: scripts/bootstrap.sh installs it) and nvcc.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "format/manifest.hpp"
#include "io/sha256.hpp"
#include "result_cache/result_cache.hpp"
#include "test_util.hpp"
#include "tiny_project.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using result_cache::CacheLookup;
using test::read_file;
using test::TempDir;
using test::write_file;

bool have_nginx() { return test::run("command -v nginx").exit_code == 0; }

bool port_open(int port) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = connect(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  close(s);
  return ok;
}

// nginx serving `root` read-write over plain HTTP (WebDAV PUT), as a child process with its
// config, pid file and logs in a temp prefix.
class DavNginx {
 public:
  explicit DavNginx(const fs::path& root) {
    fs::path p = prefix_.path();
    fs::create_directories(p / "logs");
    fs::create_directories(p / "tmp");
    std::string P = p.string();
    for (int attempt = 0; attempt < 3; ++attempt) {
      port_ = test::free_port();
      // master_process off: one process that never switches user, so a root test run can write
      // the 0700 temp dirs as well as a normal one.
      write_file(p / "nginx.conf",
                 "daemon off;\nmaster_process off;\nworker_processes 1;\nerror_log " + P +
                     "/logs/error.log;\npid " + P +
                     "/logs/nginx.pid;\nevents { worker_connections 128; }\nhttp {\n"
                     "  access_log " +
                     P +
                     "/logs/access.log;\n"
                     "  client_body_temp_path " +
                     P +
                     "/tmp/body;\n"
                     "  proxy_temp_path " +
                     P + "/tmp/proxy;\n  fastcgi_temp_path " + P +
                     "/tmp/fcgi;\n  uwsgi_temp_path " + P + "/tmp/uwsgi;\n  scgi_temp_path " + P +
                     "/tmp/scgi;\n  default_type application/octet-stream;\n"
                     "  server {\n    listen 127.0.0.1:" +
                     std::to_string(port_) +
                     ";\n"
                     "    root " +
                     root.string() +
                     ";\n"
                     "    client_max_body_size 1g;\n"
                     "    dav_methods PUT;\n    create_full_put_path on;\n  }\n}\n");
      child_ = std::make_unique<test::Child>(
          std::vector<std::string>{"nginx", "-p", P, "-c", P + "/nginx.conf"}, p / "logs/stderr");
      for (int i = 0; i < 300 && child_->running(); ++i) {
        if (port_open(port_)) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      child_.reset();  // the port was taken meanwhile: try another
    }
    throw std::runtime_error("nginx did not start: " + read_file(p / "logs/stderr") +
                             read_file(p / "logs/error.log"));
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // nginx writes a request's log line after it has sent the response, so a client can be
  // faster than the log: wait (bounded) until every one of `lines` is there.
  std::string access_log_with(const std::vector<std::string>& lines) const {
    std::string log;
    for (int i = 0; i < 200; ++i) {
      log = read_file(prefix_ / "logs/access.log");
      if (std::all_of(lines.begin(), lines.end(),
                      [&](const std::string& l) { return log.find(l) != std::string::npos; }))
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return log;
  }

 private:
  TempDir prefix_;
  int port_ = 0;
  std::unique_ptr<test::Child> child_;
};

class HttpCache : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_nginx()) GTEST_SKIP() << "nginx is not installed (Debian: nginx-light)";
    fs::create_directories(root_.path());
    nginx_ = std::make_unique<DavNginx>(root_.path());
  }
  TempDir root_;
  std::unique_ptr<DavNginx> nginx_;
  const std::string key_ = std::string(64, 'e');
  const std::string bytes_ = "a fatbin, as far as the cache knows";
};

TEST_F(HttpCache, AMissThenAStoreThenAHitWithTheSameBytes) {
  auto cache = result_cache::open_result_cache(nginx_->url());
  EXPECT_EQ(cache->lookup(key_, "a.fatbin").outcome, CacheLookup::Outcome::Miss);
  result_cache::CacheStore s = cache->store(key_, "a.fatbin", bytes_);
  ASSERT_TRUE(s.ok) << s.reason;
  // On the server's disk at the protocol's paths; the bytes went up before the entry.
  EXPECT_EQ(read_file(root_ / ("cas/" + io::sha256_hex(bytes_))), bytes_);
  EXPECT_TRUE(fs::exists(root_ / ("ac/" + key_)));
  const std::string blob_line = "PUT /cas/" + io::sha256_hex(bytes_), entry_line = "PUT /ac/" + key_;
  std::string log = nginx_->access_log_with({blob_line, entry_line});
  std::size_t put_blob = log.find(blob_line);
  std::size_t put_entry = log.find(entry_line);
  ASSERT_NE(put_blob, std::string::npos) << log;
  ASSERT_NE(put_entry, std::string::npos) << log;
  EXPECT_LT(put_blob, put_entry);
  CacheLookup hit = cache->lookup(key_, "a.fatbin");
  EXPECT_EQ(hit.outcome, CacheLookup::Outcome::Hit) << hit.reason;
  EXPECT_EQ(hit.bytes, bytes_);
}

TEST_F(HttpCache, APoisonedBlobIsRefusedNamingItsUrlAndBothDigests) {
  auto cache = result_cache::open_result_cache(nginx_->url());
  ASSERT_TRUE(cache->store(key_, "a.fatbin", bytes_).ok);
  std::string poisoned = bytes_;
  poisoned[0] ^= 1;
  write_file(root_ / ("cas/" + io::sha256_hex(bytes_)), poisoned);
  CacheLookup r = cache->lookup(key_, "a.fatbin");
  EXPECT_EQ(r.outcome, CacheLookup::Outcome::Refused);
  EXPECT_TRUE(r.bytes.empty());
  EXPECT_NE(r.reason.find(nginx_->url() + "/cas/" + io::sha256_hex(bytes_) + ": sha256 is " +
                          io::sha256_hex(poisoned) + ", " + nginx_->url() + "/ac/" + key_ + " says " +
                          io::sha256_hex(bytes_)),
            std::string::npos)
      << r.reason;
  // A blob that keeps coming past its size is cut off, not read whole.
  write_file(root_ / ("cas/" + io::sha256_hex(bytes_)), std::string(1 << 20, 'x'));
  r = cache->lookup(key_, "a.fatbin");
  EXPECT_EQ(r.outcome, CacheLookup::Outcome::Refused);
  EXPECT_NE(r.reason.find("more than " + std::to_string(bytes_.size()) + " bytes"),
            std::string::npos)
      << r.reason;
}

TEST_F(HttpCache, CredentialsInTheUrlAreSentButNeverShown) {
  std::string url = nginx_->url();
  url.insert(std::string("http://").size(), "kiln:s3cret@");
  auto cache = result_cache::open_result_cache(url);
  EXPECT_EQ(cache->location(), nginx_->url());
  ASSERT_TRUE(cache->store(key_, "a.fatbin", bytes_).ok);
  write_file(root_ / ("cas/" + io::sha256_hex(bytes_)), "");
  CacheLookup r = cache->lookup(key_, "a.fatbin");
  EXPECT_EQ(r.outcome, CacheLookup::Outcome::Refused);
  EXPECT_EQ(r.reason.find("s3cret"), std::string::npos) << r.reason;
}

TEST_F(HttpCache, ADeadServerIsUnavailableWithinTheConnectBound) {
  std::string dead = "http://127.0.0.1:" + std::to_string(test::free_port());
  auto cache = result_cache::open_result_cache(dead);
  auto t0 = std::chrono::steady_clock::now();
  CacheLookup r = cache->lookup(key_, "a.fatbin");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.5);
  EXPECT_EQ(r.outcome, CacheLookup::Outcome::Unavailable);
  EXPECT_NE(r.reason.find("GET " + dead + "/ac/" + key_ + ": connection failed"), std::string::npos)
      << r.reason;
  result_cache::CacheStore s = cache->store(key_, "a.fatbin", bytes_);
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.reason.find("PUT " + dead + "/cas/"), std::string::npos) << s.reason;
}

// ---- kiln build through the cache, with nvcc ----

class CachedKilnBuild : public HttpCache {
 protected:
  // The tiny project at `src`, built for sm_90 (two compiles) into `out`; the --json summary.
  nlohmann::json build(const fs::path& src, const fs::path& out, const std::string& extra) {
    auto r = test::run("SOURCE_DATE_EPOCH=1700000000 KILN_BUILD_CACHE= " + test::kiln_cli() +
                       " build --json --source " + src.string() + " --out " + out.string() +
                       " --targets sm_90 " + extra + " 2>" + (out.string() + ".stderr"));
    EXPECT_EQ(r.exit_code, 0) << r.out << read_file(out.string() + ".stderr");
    return nlohmann::json::parse(r.out.substr(r.out.find('{')));
  }
  static std::map<std::string, std::string> dist(const fs::path& out) {
    std::map<std::string, std::string> files;
    for (const auto& e : fs::directory_iterator(out / "dist"))
      files[e.path().filename().string()] = read_file(e.path());
    return files;
  }
  TempDir work_;
};

TEST_F(CachedKilnBuild, NoCacheColdRemoteAndWarmRemoteFromAnotherPathGiveTheSameBytes) {
  fs::path src = work_ / "src", elsewhere = work_ / "another/checkout/src";
  test::tiny::write_project(src);
  test::tiny::write_project(elsewhere);

  nlohmann::json none = build(src, work_ / "none", "");
  EXPECT_TRUE(none["cache"].is_null());
  EXPECT_EQ(none["compiled"], 2);

  nlohmann::json cold = build(src, work_ / "cold", "--cache " + nginx_->url());
  EXPECT_EQ(cold["compiled"], 2);
  EXPECT_EQ(cold["cache"]["location"], nginx_->url());
  EXPECT_EQ(cold["cache"]["misses"], 2);
  EXPECT_EQ(cold["cache"]["stored"], 2);
  EXPECT_GT(cold["cache"]["bytes_stored"].get<std::uint64_t>(), 0u);
  EXPECT_TRUE(cold["cache"]["skipped"].is_null());
  EXPECT_EQ(dist(work_ / "cold"), dist(work_ / "none"));

  nlohmann::json warm = build(elsewhere, work_ / "warm", "--cache " + nginx_->url() + "/");
  EXPECT_EQ(warm["compiled"], 0);
  EXPECT_EQ(warm["cache"]["hits"], 2);
  EXPECT_EQ(warm["cache"]["misses"], 0);
  EXPECT_EQ(warm["cache"]["bytes_fetched"], cold["cache"]["bytes_stored"]);
  EXPECT_EQ(dist(work_ / "warm"), dist(work_ / "none"));

  // A changed header reaches the key: the family that includes it compiles again.
  write_file(elsewhere / "kernels/common.cuh",
             read_file(elsewhere / "kernels/common.cuh") + "// changed\n");
  nlohmann::json changed = build(elsewhere, work_ / "warm", "--cache " + nginx_->url());
  EXPECT_EQ(changed["compiled"], 2);
  EXPECT_EQ(changed["cache"]["misses"], 2);
}

// Misses compile through the launcher (sccache in CI; here a wrapper that logs each call), hits
// never reach it. A directory cache: no server needed.
TEST(CachedKilnBuildLauncher, MissesCompileThroughTheLauncherAndHitsRunNoCompiler) {
  TempDir work;
  fs::path src = work / "src", elsewhere = work / "elsewhere/src", log = work / "launched.log";
  test::tiny::write_project(src);
  test::tiny::write_project(elsewhere);
  write_file(work / "launcher.sh",
             "#!/bin/sh\necho \"$*\" >> '" + log.string() + "'\nexec \"$@\"\n");
  fs::permissions(work / "launcher.sh", fs::perms::owner_all);
  auto build = [&](const fs::path& source, const fs::path& out) {
    auto r = test::run("SOURCE_DATE_EPOCH=1700000000 KILN_BUILD_CACHE= " + test::kiln_cli() +
                       " build --source " + source.string() + " --out " + out.string() +
                       " --targets sm_90 --cache " + (work / "cache").string() + " --launcher " +
                       (work / "launcher.sh").string());
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return r.out;
  };
  std::string cold = build(src, work / "cold");
  EXPECT_NE(cold.find("0 hits, 2 misses"), std::string::npos) << cold;
  std::string launched = read_file(log);
  // The two misses are one family on one target: one front-end pass runs through the launcher.
  EXPECT_EQ(std::count(launched.begin(), launched.end(), '\n'), 1) << launched;
  EXPECT_NE(launched.find(" -ptx "), std::string::npos) << launched;
  EXPECT_NE(launched.find("nvcc"), std::string::npos) << launched;

  std::string warm = build(elsewhere, work / "warm");
  EXPECT_NE(warm.find("2 hits, 0 misses"), std::string::npos) << warm;
  EXPECT_EQ(read_file(log), launched) << "a hit ran the compiler";
  EXPECT_EQ(
      read_file(work / "warm/dist" / format::index_file_name(test::tiny::kPackage, test::tiny::kVersion)),
      read_file(work / "cold/dist" / format::index_file_name(test::tiny::kPackage, test::tiny::kVersion)));
}

}  // namespace
}  // namespace kiln
