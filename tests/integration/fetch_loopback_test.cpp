// kiln fetch against real servers on loopback: nginx over HTTPS with a CA made here, file://
// mirrors, and tests/misbehaving_server/server.py for every way a mirror can go wrong.
// Needs nginx, openssl, curl and python3 (scripts/bootstrap.sh installs them); the nginx tests
// skip with a message when nginx or openssl is missing.
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
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "child_process.hpp"
#include "fetch/fetch.hpp"
#include "fetch/fetch_internal.hpp"
#include "format/manifest.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "kiln/loader.hpp"
#include "kiln/version.hpp"
#include "loader_factory.hpp"
#include "misbehaving_server.hpp"
#include "plan/resolver.hpp"
#include "runtime/driver.hpp"
#include "stand_in_driver.hpp"
#include "store/store.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"
#include "transport/http_transport.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using test::read_file;
using test::TempDir;
using test::write_file;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool have_tool(const std::string& tool) {
  return test::run("command -v " + tool + " >/dev/null").exit_code == 0;
}

// --- a release directory as `kiln build --dist` writes it, with fake fatbin bytes -------------

// The shared fixture's dist (synthetic_release.hpp), and where a mirror serving its directory
// serves each archive.
struct Release : test::SyntheticDist {
  std::string url_path(const std::string& target) const { return "/" + archive.at(target); }
};

// Per target, axpy_dtype_f32 and rmsnorm_dtype_f16 of `fatbin_bytes` pseudo-random bytes each
// (other bytes for every target and artifact), archives at `zstd_level`. loadable = true:
// artifacts carry the source hash and entry symbols of the registry embedded in libkiln, so a
// Loader accepts them as fresh (the fatbin bytes stay fake).
Release make_release(const fs::path& dir, const std::vector<std::string>& targets,
                     std::size_t fatbin_bytes = 20000, int zstd_level = 3, bool loadable = false) {
  test::ReleaseSpec spec;
  spec.zstd_level = zstd_level;
  spec.loadable = loadable;
  spec.artifacts = [targets, fatbin_bytes](const std::string& target) {
    const auto n = std::find(targets.begin(), targets.end(), target) - targets.begin();
    const unsigned seed = 1 + 2 * static_cast<unsigned>(n);
    return std::vector<test::SyntheticArtifact>{
        {"axpy_dtype_f32", test::random_bytes(fatbin_bytes, seed)},
        {"rmsnorm_dtype_f16", test::random_bytes(fatbin_bytes, seed + 1)}};
  };
  return Release{test::write_release_dist(dir, spec, targets)};
}

// --- child processes and ports ----------------------------------------------------------------

using test::Child;
using test::free_port;

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

// A CA and a server certificate for 127.0.0.1, made with the openssl CLI.
struct TestCa {
  fs::path ca_pem, server_pem, server_key;
  explicit TestCa(const fs::path& dir) {
    fs::create_directories(dir);
    ca_pem = dir / "ca.pem";
    server_pem = dir / "server.pem";
    server_key = dir / "server.key";
    std::string d = dir.string();
    write_file(dir / "ext.cnf", "subjectAltName=IP:127.0.0.1\n");
    std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    auto r = test::run("(cd " + d + " && openssl req -x509 " + ec +
                       " -keyout ca.key -out ca.pem -days 2 -subj '/CN=kiln test CA' && "
                       "openssl req " +
                       ec +
                       " -keyout server.key -out server.csr "
                       "-subj '/CN=127.0.0.1' && "
                       "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key "
                       "-CAcreateserial -out server.pem -days 2 -extfile ext.cnf) 2>&1");
    if (r.exit_code != 0) throw std::runtime_error("openssl failed: " + r.out);
  }
};

using test::MisbehavingServer;

// The misbehaving server over HTTPS with a certificate from `ca`.
std::unique_ptr<MisbehavingServer> tls_server(const fs::path& root, const std::string& mode,
                                              std::vector<std::string> extra, const TestCa& ca) {
  extra.insert(extra.end(),
               {"--tls-cert", ca.server_pem.string(), "--tls-key", ca.server_key.string()});
  return std::make_unique<MisbehavingServer>(root, mode, extra, "https");
}

// nginx serving `root` over HTTPS (certificate from `ca`) and plain HTTP, as a child process
// with its config, pid file and logs in a temp prefix.
class Nginx {
 public:
  Nginx(const fs::path& root, const TestCa& ca) {
    for (int attempt = 0; attempt < 3; ++attempt) {
      https_port_ = free_port();
      http_port_ = free_port();
      fs::path p = prefix_.path();
      fs::create_directories(p / "logs");
      fs::create_directories(p / "tmp");
      std::string P = p.string();
      // master_process off: one process that never switches user, so a root test run can read
      // the 0700 temp dirs as well as a normal one.
      write_file(p / "nginx.conf",
                 "daemon off;\nmaster_process off;\nworker_processes 1;\n"
                 "error_log " +
                     P + "/logs/error.log;\npid " + P +
                     "/logs/nginx.pid;\n"
                     "events { worker_connections 128; }\n"
                     "http {\n  access_log " +
                     P +
                     "/logs/access.log;\n"
                     "  client_body_temp_path " +
                     P + "/tmp/body;\n  proxy_temp_path " + P +
                     "/tmp/proxy;\n"
                     "  fastcgi_temp_path " +
                     P + "/tmp/fcgi;\n  uwsgi_temp_path " + P +
                     "/tmp/uwsgi;\n"
                     "  scgi_temp_path " +
                     P +
                     "/tmp/scgi;\n"
                     "  default_type application/octet-stream;\n  sendfile on;\n"
                     "  server {\n    listen 127.0.0.1:" +
                     std::to_string(https_port_) +
                     " ssl;\n"
                     "    ssl_certificate " +
                     ca.server_pem.string() +
                     ";\n"
                     "    ssl_certificate_key " +
                     ca.server_key.string() +
                     ";\n"
                     "    root " +
                     root.string() +
                     ";\n  }\n"
                     "  server {\n    listen 127.0.0.1:" +
                     std::to_string(http_port_) +
                     ";\n"
                     "    root " +
                     root.string() + ";\n  }\n}\n");
      child_ = std::make_unique<Child>(
          std::vector<std::string>{"nginx", "-p", P, "-c", P + "/nginx.conf"}, p / "logs/stderr");
      for (int i = 0; i < 300; ++i) {
        if (!child_->running()) break;
        if (port_open(https_port_) && port_open(http_port_)) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      child_.reset();  // a port was taken meanwhile: try others
    }
    throw std::runtime_error("nginx did not start: " + read_file(prefix_ / "logs/stderr") +
                             read_file(prefix_ / "logs/error.log"));
  }
  std::string https_url() const { return "https://127.0.0.1:" + std::to_string(https_port_); }
  std::string http_url() const { return "http://127.0.0.1:" + std::to_string(http_port_); }
  // How many GETs of `path` the access log holds. nginx logs a request after sending its
  // response, so a client can be faster than the log: wait (bounded) for `expected` of them.
  int requests_for(const std::string& path, int expected) const {
    int n = 0;
    for (int i = 0; i < 200; ++i) {
      std::string log = read_file(prefix_ / "logs/access.log");
      n = 0;
      for (std::size_t p = log.find("GET " + path + " "); p != std::string::npos;
           p = log.find("GET " + path + " ", p + 1))
        ++n;
      if (n >= expected) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return n;
  }

 private:
  TempDir prefix_;
  int https_port_ = 0, http_port_ = 0;
  std::unique_ptr<Child> child_;
};

// --- assertions ----------------------------------------------------------------------------

// Everything in the destination is either a verified store directory or the lock directory;
// no temp file, no archive, no partial store.
void expect_only_verified(const fs::path& dest, std::set<std::string> stems) {
  std::set<std::string> seen;
  if (fs::exists(dest))
    for (const auto& e : fs::directory_iterator(dest)) seen.insert(e.path().filename().string());
  if (seen.count(".kiln-locks")) {
    seen.erase(".kiln-locks");
    for (const auto& e : fs::directory_iterator(dest / ".kiln-locks"))
      EXPECT_EQ(e.path().extension(), ".lock") << e.path();
  }
  EXPECT_EQ(seen, stems) << "destination " << dest;
  for (const auto& s : stems) EXPECT_TRUE(store::store_has_verified(dest, s)) << s;
}

template <typename Fn>
std::pair<ErrorKind, std::string> error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return {e.kind(), e.what()};
  }
  ADD_FAILURE() << "no error thrown";
  return {ErrorKind::Internal, ""};
}

class Fetch : public ::testing::Test {
 protected:
  void SetUp() override {
    transport::forget_bad_mirrors();
    rel = make_release(tmp / "release", {"sm_90a", "sm_80"});
    dest = tmp / "store";
  }
  fetch::FetchOptions options(std::vector<std::string> mirrors) {
    fetch::FetchOptions o;
    o.mirrors = std::move(mirrors);
    o.package = rel.package;
    o.version = rel.version;
    o.index_sha256 = rel.index_sha256;
    o.connect_timeout_ms = 2000;
    o.low_speed_bytes = 1024;
    o.low_speed_seconds = 2;
    o.max_retries = 2;
    o.retry_base_ms = 50;
    return o;
  }
  TempDir tmp;
  Release rel;
  fs::path dest;
};

// --- nginx over HTTPS, and file:// --------------------------------------------------------------

class FetchNginx : public Fetch {
 protected:
  void SetUp() override {
    if (!have_tool("nginx") || !have_tool("openssl"))
      GTEST_SKIP() << "nginx or openssl is not installed (Debian: nginx-light openssl; "
                      "scripts/bootstrap.sh installs them)";
    Fetch::SetUp();
    ca.emplace(tmp / "ca");
    nginx.emplace(rel.dir, *ca);
  }
  std::optional<TestCa> ca;
  std::optional<Nginx> nginx;
};

TEST_F(FetchNginx, HttpsWithTestCaInstallsManifestAndArtifactBytes) {
  fetch::FetchOptions o = options({nginx->https_url()});
  o.ca_bundle = ca->ca_pem.string();
  fetch::FetchResult r = fetch::fetch_targets(o, {"sm_90a", "sm_80"}, dest.string());
  ASSERT_EQ(r.installed.size(), 2u);
  EXPECT_TRUE(r.failures.empty());
  for (const std::string t : {"sm_90a", "sm_80"}) {
    fs::path dir = dest / rel.stem(t);
    EXPECT_EQ(r.installed[t == "sm_90a" ? 0 : 1], dir.string());
    format::Manifest m = format::parse_manifest(read_file(dir / "manifest.json"), "installed");
    EXPECT_EQ(m.target, t);
    for (const auto& [file, bytes] : rel.artifacts[t])
      EXPECT_EQ(read_file(dir / file), bytes) << file;
  }
  expect_only_verified(dest, {rel.stem("sm_90a"), rel.stem("sm_80")});
  EXPECT_EQ(nginx->requests_for(rel.url_path("sm_90a"), 1), 1);
}

TEST_F(FetchNginx, HttpsWithoutTrustingTheCaIsRefusedAsTls) {
  fetch::FetchOptions o = options({nginx->https_url()});
  TestCa other(tmp / "other-ca");  // a CA that did not sign nginx's certificate
  o.ca_bundle = other.ca_pem.string();
  auto [kind, msg] = error_of([&] { fetch::fetch_targets(o, {"sm_90a"}, dest.string()); });
  EXPECT_EQ(kind, ErrorKind::Network);
  EXPECT_CONTAINS(msg, nginx->https_url());
  EXPECT_CONTAINS(msg, "TLS verification failed");
  expect_only_verified(dest, {});
}

// KILN_CA_BUNDLE reaches a fetch the way every caller passes it: read by the one table into
// LoaderConfig::ca_bundle, handed over as FetchOptions::ca_bundle (fetch.cpp reads no variable).
TEST_F(FetchNginx, CaBundleFromEnvironmentIsUsed) {
  setenv("KILN_CA_BUNDLE", ca->ca_pem.c_str(), 1);
  fetch::FetchOptions o = options({nginx->https_url()});
  o.ca_bundle = LoaderConfig::from_env().ca_bundle;
  unsetenv("KILN_CA_BUNDLE");
  fetch::FetchResult r = fetch::fetch_targets(o, {"sm_80"}, dest.string());
  EXPECT_EQ(r.installed.size(), 1u);
}

TEST_F(FetchNginx, FileMirrorInstallsTheSameStore) {
  fetch::FetchResult r = fetch::fetch_targets(options({"file://" + rel.dir.string()}), {"sm_90a"}, dest.string());
  ASSERT_EQ(r.installed.size(), 1u);
  for (const auto& [file, bytes] : rel.artifacts["sm_90a"])
    EXPECT_EQ(read_file(dest / rel.stem("sm_90a") / file), bytes);
  expect_only_verified(dest, {rel.stem("sm_90a")});
}

TEST_F(FetchNginx, RerunIsANoOpThatReverifiesAndRepairsATamperedStore) {
  fetch::FetchOptions o = options({nginx->https_url()});
  o.ca_bundle = ca->ca_pem.string();
  fetch::fetch_targets(o, {"sm_90a"}, dest.string());
  fetch::FetchResult again = fetch::fetch_targets(o, {"sm_90a"}, dest.string());
  EXPECT_TRUE(again.installed.empty());
  ASSERT_EQ(again.already_present.size(), 1u);
  EXPECT_EQ(nginx->requests_for(rel.url_path("sm_90a"), 1), 1);
  // A flipped byte in an installed artifact is noticed and the archive fetched again.
  fs::path art = dest / rel.stem("sm_90a") / "axpy_dtype_f32.fatbin";
  std::string bytes = read_file(art);
  bytes[10] ^= 1;
  write_file(art, bytes);
  fetch::FetchResult repaired = fetch::fetch_targets(o, {"sm_90a"}, dest.string());
  EXPECT_EQ(repaired.installed.size(), 1u);
  EXPECT_EQ(read_file(art), rel.artifacts["sm_90a"]["axpy_dtype_f32.fatbin"]);
  EXPECT_EQ(nginx->requests_for(rel.url_path("sm_90a"), 2), 2);
}

TEST_F(FetchNginx, CliFetchPrintsJsonAndExitsZero) {
  std::string cmd = test::kiln_cli() + " fetch --json --targets sm_80 --dest " + dest.string() +
                    " --mirror " + nginx->https_url() + " --index-sha256 " + rel.index_sha256 +
                    " --ca-bundle " + ca->ca_pem.string();
  // Progress lines go to stderr; stdout holds only the JSON.
  std::string redirect = " >" + (tmp / "out.json").string() + " 2>" + (tmp / "err.txt").string();
  auto r = test::run("(" + cmd + redirect + ")");
  ASSERT_EQ(r.exit_code, 0) << read_file(tmp / "err.txt");
  auto j = nlohmann::json::parse(read_file(tmp / "out.json"));
  EXPECT_EQ(j["installed"][0].get<std::string>(), (dest / rel.stem("sm_80")).string());
  EXPECT_CONTAINS(read_file(tmp / "err.txt"), "kiln fetch: installed ");
  auto again = test::run("(" + cmd + redirect + ")");
  EXPECT_EQ(again.exit_code, 0);
  j = nlohmann::json::parse(read_file(tmp / "out.json"));
  EXPECT_EQ(j["already_present"].size(), 1u);
  EXPECT_EQ(j["installed"].size(), 0u);
}

TEST_F(FetchNginx, ProbeReportsReachableMirrorAndDeadOne) {
  fetch::FetchOptions o = options({nginx->https_url(), "http://127.0.0.1:" + std::to_string(free_port())});
  o.ca_bundle = ca->ca_pem.string();
  auto probes = fetch::probe_mirrors(o);
  ASSERT_EQ(probes.size(), 2u);
  EXPECT_TRUE(probes[0].reachable) << probes[0].detail;
  EXPECT_EQ(probes[0].http_status, 200);
  EXPECT_FALSE(probes[1].reachable);
  EXPECT_CONTAINS(probes[1].detail, "connection failed");
}

// --- misbehaving mirrors -------------------------------------------------------------------

TEST_F(Fetch, FlippedByteIsRejectedNamingMirrorAndDigestsAndLeavesNothing) {
  MisbehavingServer s(rel.dir, "flip");
  auto [kind, msg] =
      error_of([&] { fetch::fetch_targets(options({s.url()}), {"sm_90a"}, dest.string()); });
  EXPECT_EQ(kind, ErrorKind::Integrity);
  EXPECT_CONTAINS(msg, s.url() + rel.url_path("sm_90a"));
  EXPECT_CONTAINS(msg, "SHA-256 mismatch");
  EXPECT_EQ(s.count(rel.url_path("sm_90a")), 1);  // bad bytes are not retried
  expect_only_verified(dest, {});
}

TEST_F(Fetch, TruncatedBodyIsRejectedAsSizeMismatch) {
  MisbehavingServer s(rel.dir, "truncate");
  auto [kind, msg] =
      error_of([&] { fetch::fetch_targets(options({s.url()}), {"sm_90a"}, dest.string()); });
  EXPECT_EQ(kind, ErrorKind::Integrity);
  EXPECT_CONTAINS(msg, "size mismatch");
  EXPECT_CONTAINS(msg, s.url());
  expect_only_verified(dest, {});
}

TEST_F(Fetch, EndlessBodyIsCutAtTheIndexedSize) {
  MisbehavingServer s(rel.dir, "endless");
  auto t0 = Clock::now();
  auto [kind, msg] =
      error_of([&] { fetch::fetch_targets(options({s.url()}), {"sm_90a"}, dest.string()); });
  EXPECT_LT(seconds_since(t0), 5.0);
  EXPECT_EQ(kind, ErrorKind::Integrity);
  EXPECT_CONTAINS(msg, "served more than the " +
                           std::to_string(fs::file_size(rel.dir / rel.archive["sm_90a"])) +
                           " bytes");
  expect_only_verified(dest, {});
}

TEST_F(Fetch, EndlessIndexIsCutAtTheIndexLimit) {
  MisbehavingServer s(rel.dir, "endless", {"--match", "index.json"});
  auto [kind, msg] =
      error_of([&] { fetch::fetch_targets(options({s.url()}), {"sm_90a"}, dest.string()); });
  EXPECT_EQ(kind, ErrorKind::Network);
  EXPECT_CONTAINS(msg, "index larger than");
  expect_only_verified(dest, {});
}

TEST_F(Fetch, ForgedIndexIsRefusedShowingPinnedAndServedDigests) {
  MisbehavingServer s(rel.dir, "flip", {"--match", "index.json"});
  std::string index = read_file(rel.dir / format::index_file_name("kiln-kernels", rel.version));
  index[index.size() / 2] ^= 1;
  auto [kind, msg] =
      error_of([&] { fetch::fetch_targets(options({s.url()}), {"sm_90a"}, dest.string()); });
  EXPECT_EQ(kind, ErrorKind::Integrity);
  EXPECT_CONTAINS(msg, rel.index_sha256);
  EXPECT_CONTAINS(msg, io::sha256_hex(index));
  EXPECT_EQ(s.count(rel.url_path("sm_90a")), 0);
}

TEST_F(Fetch, MissingArchiveIsNotFoundAndNotRetried) {
  MisbehavingServer s(rel.dir, "404");
  auto [kind, msg] =
      error_of([&] { fetch::fetch_targets(options({s.url()}), {"sm_90a"}, dest.string()); });
  EXPECT_EQ(kind, ErrorKind::NotFound);
  EXPECT_CONTAINS(msg, s.url() + rel.url_path("sm_90a") + ": HTTP 404");
  EXPECT_EQ(s.count(rel.url_path("sm_90a")), 1);
  expect_only_verified(dest, {});
}

TEST_F(Fetch, ForbiddenIsNotRetriedAndCliExitsWithNetworkCode) {
  MisbehavingServer s(rel.dir, "403");
  auto r = test::run(test::kiln_cli() + " fetch --targets sm_90a --dest " + dest.string() +
                     " --mirror " + s.url() + " --index-sha256 " + rel.index_sha256);
  EXPECT_EQ(r.exit_code, exit_code(ErrorKind::Network)) << r.out;
  EXPECT_CONTAINS(r.out, "HTTP 403");
  EXPECT_EQ(s.count(rel.url_path("sm_90a")), 1);
}

TEST_F(Fetch, ServerErrorThenSuccessIsRetried) {
  MisbehavingServer s(rel.dir, "500-then-200");
  fetch::FetchResult r = fetch::fetch_targets(options({s.url()}), {"sm_90a"}, dest.string());
  EXPECT_EQ(r.installed.size(), 1u);
  EXPECT_EQ(s.count(rel.url_path("sm_90a")), 2);
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_CONTAINS(r.failures[0].what, "HTTP 500 (retrying");
  expect_only_verified(dest, {rel.stem("sm_90a")});
}

// What the downloads report as they go (FetchOptions::progress) and in the end (the bytes this
// call downloaded: the loader's statistics count them as fetched).
TEST_F(Fetch, ProgressReportsEachArchivesBytesAndTheResultTheirSum) {
  MisbehavingServer s(rel.dir, "ok");
  fetch::FetchOptions o = options({s.url()});
  std::mutex mu;
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> last;  // file -> (bytes, size)
  o.progress = [&](const std::string& file, std::uint64_t received, std::uint64_t size) {
    std::lock_guard<std::mutex> lock(mu);
    last[file] = {received, size};
  };
  fetch::FetchResult r = fetch::fetch_targets(o, {"sm_90a", "sm_80"}, dest.string());
  std::uint64_t sum = 0;
  for (const char* t : {"sm_90a", "sm_80"}) {
    const std::string file = rel.url_path(t).substr(1);
    const std::uint64_t size = fs::file_size(rel.dir / file);
    ASSERT_EQ(last.count(file), 1u) << file;
    EXPECT_EQ(last[file], std::make_pair(size, size)) << file;
    sum += size;
  }
  EXPECT_EQ(r.bytes_downloaded, sum);
  // Everything present: nothing downloaded.
  EXPECT_EQ(fetch::fetch_targets(o, {"sm_90a", "sm_80"}, dest.string()).bytes_downloaded, 0u);
}

// Progress written into a log (stderr not a terminal) is plain lines: no carriage return, no
// terminal control sequence.
TEST_F(Fetch, CliProgressInALogIsPlainLines) {
  MisbehavingServer s(rel.dir, "ok");
  auto r = test::run("(" + test::kiln_cli() + " fetch --targets sm_90a --dest " + dest.string() +
                     " --mirror " + s.url() + " --index-sha256 " + rel.index_sha256 + " 2>" +
                     (tmp / "err.txt").string() + ")");
  ASSERT_EQ(r.exit_code, 0) << r.out << read_file(tmp / "err.txt");
  const std::string log = read_file(tmp / "err.txt");
  EXPECT_CONTAINS(log, "kiln fetch: downloading " + s.url() + rel.url_path("sm_90a"));
  EXPECT_CONTAINS(log, "kiln fetch: installed ");
  EXPECT_EQ(log.find('\r'), std::string::npos) << log;
  EXPECT_EQ(log.find('\033'), std::string::npos) << log;
}

TEST_F(Fetch, TooManyRequestsWaitsForRetryAfter) {
  MisbehavingServer s(rel.dir, "429", {"--retry-after", "1"});
  auto t0 = Clock::now();
  fetch::FetchResult r = fetch::fetch_targets(options({s.url()}), {"sm_90a"}, dest.string());
  EXPECT_GE(seconds_since(t0), 1.0);
  EXPECT_EQ(r.installed.size(), 1u);
  EXPECT_EQ(s.count(rel.url_path("sm_90a")), 2);
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_CONTAINS(r.failures[0].what, "HTTP 429 (retrying in 1000 ms)");
}

TEST_F(Fetch, StalledBodyIsAbortedByTheLowSpeedLimit) {
  MisbehavingServer s(rel.dir, "stall");
  fetch::FetchOptions o = options({s.url()});
  o.low_speed_seconds = 1;
  o.max_retries = 1;
  auto t0 = Clock::now();
  auto [kind, msg] = error_of([&] { fetch::fetch_targets(o, {"sm_90a"}, dest.string()); });
  EXPECT_LT(seconds_since(t0), 8.0);
  EXPECT_EQ(kind, ErrorKind::Network);
  EXPECT_CONTAINS(msg, "timed out");
  EXPECT_EQ(s.count(rel.url_path("sm_90a")), 2);  // one retry
  expect_only_verified(dest, {});
}

TEST_F(Fetch, RedirectFromHttpsToHttpIsRefused) {
  TestCa ca(tmp / "ca");
  MisbehavingServer plain(rel.dir, "ok");
  auto tls = tls_server(rel.dir, "redirect",
                        {"--match", "kiln-kernels", "--redirect-to", plain.url()}, ca);
  fetch::FetchOptions o = options({tls->url()});
  o.ca_bundle = ca.ca_pem.string();
  auto [kind, msg] = error_of([&] { fetch::fetch_targets(o, {"sm_90a"}, dest.string()); });
  EXPECT_EQ(kind, ErrorKind::Network);
  EXPECT_CONTAINS(msg, tls->url());
  EXPECT_CONTAINS(msg, "redirect refused");
  EXPECT_EQ(plain.total(), 0);
  expect_only_verified(dest, {});
}

TEST_F(Fetch, CorruptFirstMirrorFallsBackToSecondAndReportsTheFirst) {
  MisbehavingServer bad(rel.dir, "flip");
  MisbehavingServer good(rel.dir, "ok");
  fetch::FetchResult r =
      fetch::fetch_targets(options({bad.url(), good.url()}), {"sm_90a", "sm_80"}, dest.string());
  EXPECT_EQ(r.installed.size(), 2u);
  ASSERT_FALSE(r.failures.empty());
  EXPECT_EQ(r.failures[0].mirror, bad.url());
  EXPECT_CONTAINS(r.failures[0].what, "SHA-256 mismatch");
  // Distrusted after its first bad archive; the two archives download in parallel, so each
  // may have been asked once before the first verdict, never twice.
  EXPECT_LE(bad.count(rel.url_path("sm_90a")) + bad.count(rel.url_path("sm_80")), 2);
  expect_only_verified(dest, {rel.stem("sm_90a"), rel.stem("sm_80")});
}

TEST_F(Fetch, BothMirrorsFailingNamesBothInTheError) {
  MisbehavingServer bad(rel.dir, "flip");
  MisbehavingServer gone(rel.dir, "404");
  auto [kind, msg] = error_of([&] {
    fetch::fetch_targets(options({bad.url(), gone.url()}), {"sm_90a"}, dest.string());
  });
  // One mirror lacks it, the other serves other bytes: nowhere is it to be had (a retry would
  // not change that).
  EXPECT_EQ(kind, ErrorKind::NotFound);
  EXPECT_CONTAINS(msg, bad.url() + rel.url_path("sm_90a") + ": SHA-256 mismatch");
  EXPECT_CONTAINS(msg, gone.url() + rel.url_path("sm_90a") + ": HTTP 404");
  expect_only_verified(dest, {});
}

// One fault, one kind: a release the mirror does not have is NotFound (exit 6) whether its index
// or its archive is missing, over http or file://, from the CLI or the library; a mirror that
// cannot answer (connection refused, 5xx after every retry) stays Network (exit 8).
TEST_F(Fetch, MissingReleaseIsNotFoundOnEveryPinnedPathAndAnUnreachableMirrorIsNetwork) {
  fs::create_directories(tmp / "empty");
  MisbehavingServer empty(tmp / "empty", "ok");
  auto [kind, msg] =
      error_of([&] { fetch::fetch_targets(options({empty.url()}), {"sm_90a"}, dest.string()); });
  EXPECT_EQ(kind, ErrorKind::NotFound) << msg;
  EXPECT_CONTAINS(msg, empty.url() + "/" + rel.index_path.filename().string() + ": HTTP 404");
  EXPECT_CONTAINS(msg, "is not on these mirrors");
  EXPECT_EQ(empty.count("/" + rel.index_path.filename().string()), 1);  // not retried
  auto cli = [&](const std::string& mirror) {
    return test::run(test::kiln_cli() + " fetch --targets sm_90a --dest " + dest.string() +
                     " --mirror " + mirror + " --index-sha256 " + rel.index_sha256);
  };
  for (const std::string& mirror : {empty.url(), "file://" + (tmp / "empty").string()}) {
    auto r = cli(mirror);
    EXPECT_EQ(r.exit_code, exit_code(ErrorKind::NotFound)) << r.out;
    EXPECT_CONTAINS(r.out, "kiln: error (not-found): no mirror served a trusted index");
    EXPECT_CONTAINS(r.out, "--mirror, KILN_MIRRORS");
  }
  MisbehavingServer no_archive(rel.dir, "404", {"--match", "sm_90a"});
  auto a = cli(no_archive.url());
  EXPECT_EQ(a.exit_code, exit_code(ErrorKind::NotFound)) << a.out;
  EXPECT_CONTAINS(a.out, no_archive.url() + rel.url_path("sm_90a") + ": HTTP 404");
  // Not missing, unreachable: nothing listens, or every attempt is a 500.
  auto refused = cli("http://127.0.0.1:" + std::to_string(free_port()));
  EXPECT_EQ(refused.exit_code, exit_code(ErrorKind::Network)) << refused.out;
  MisbehavingServer failing(rel.dir, "500-then-200", {"--match", "index", "--fail-count", "99"});
  fetch::FetchOptions o = options({failing.url()});
  auto [k500, m500] = error_of([&] { fetch::fetch_targets(o, {"sm_90a"}, dest.string()); });
  EXPECT_EQ(k500, ErrorKind::Network) << m500;
  EXPECT_EQ(failing.count("/" + rel.index_path.filename().string()), 3);  // 1 + 2 retries
  expect_only_verified(dest, {});
}

// `kiln fetch --device` chooses from the index and fetches from it: one download of the index.
// "waiting for the lock" is said only when another process holds the archive's lock.
TEST_F(Fetch, CliFetchDeviceDownloadsTheIndexOnceAndWaitsAloudOnlyForAHolder) {
  MisbehavingServer s(rel.dir, "ok");
  const std::string fetch = test::kiln_cli() + " fetch --device sm_90 --mirror " + s.url() +
                            " --index-sha256 " + rel.index_sha256 + " --dest ";
  auto r = test::run(fetch + dest.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(s.count("/" + rel.index_path.filename().string()), 1) << r.out;
  EXPECT_EQ(s.count(rel.url_path("sm_90a")), 1);
  EXPECT_EQ(r.out.find("waiting"), std::string::npos) << r.out;
  expect_only_verified(dest, {rel.stem("sm_90a")});

  // Another holder of the archive's lock for a second: now the fetch waits, and says so.
  fs::path other = tmp / "other";
  fs::create_directories(store::store_file_lock_path(other, rel.archive.at("sm_90a")).parent_path());
  auto lock = io::FileLock::acquire(store::store_file_lock_path(other, rel.archive.at("sm_90a")),
                                std::chrono::seconds(5));
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    lock.release();
  });
  auto w = test::run(fetch + other.string());
  release.join();
  ASSERT_EQ(w.exit_code, 0) << w.out;
  EXPECT_CONTAINS(w.out, "waiting for the lock on " + rel.archive.at("sm_90a"));
  expect_only_verified(other, {rel.stem("sm_90a")});
}

TEST_F(Fetch, OfflineWithNothingLocalFailsAtOnceAndAsksNoServer) {
  MisbehavingServer s(rel.dir, "ok");
  fetch::FetchOptions o = options({s.url()});
  o.offline = true;
  auto t0 = Clock::now();
  auto [kind, msg] = error_of([&] { fetch::fetch_targets(o, {"sm_90a"}, dest.string()); });
  EXPECT_LT(seconds_since(t0), 0.5);
  EXPECT_EQ(kind, ErrorKind::NotFound);
  EXPECT_CONTAINS(msg, "kiln fetch --package kiln-kernels --version " +
                           std::string(kiln::version()) + " --targets sm_90a --dest " +
                           dest.string());
  EXPECT_EQ(s.total(), 0);
  // The CLI honours KILN_OFFLINE too.
  auto r =
      test::run("KILN_OFFLINE=1 " + test::kiln_cli() + " fetch --targets sm_90a --dest " +
                dest.string() + " --mirror " + s.url() + " --index-sha256 " + rel.index_sha256);
  EXPECT_EQ(r.exit_code, exit_code(ErrorKind::NotFound)) << r.out;
  EXPECT_EQ(s.total(), 0);
}

TEST_F(Fetch, EightProcessesFetchingTheSameArchiveDownloadItOnce) {
  MisbehavingServer s(rel.dir, "slow");  // about a second per archive, so the eight overlap
  std::vector<std::unique_ptr<Child>> kids;
  for (int i = 0; i < 8; ++i)
    kids.push_back(std::make_unique<Child>(
        std::vector<std::string>{test::kiln_cli(), "fetch", "--targets", "sm_90a", "--dest",
                                 dest.string(), "--mirror", s.url(), "--index-sha256",
                                 rel.index_sha256},
        tmp / ("kid" + std::to_string(i) + ".log")));
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(kids[i]->wait(), 0) << read_file(tmp / ("kid" + std::to_string(i) + ".log"));
  EXPECT_EQ(s.count(rel.url_path("sm_90a")), 1);
  expect_only_verified(dest, {rel.stem("sm_90a")});
}

TEST_F(Fetch, ProcessKilledMidDownloadLeavesNothingALaterFetchAccepts) {
  MisbehavingServer stall(rel.dir, "stall", {"--stall-seconds", "60"});
  Child kid({test::kiln_cli(), "fetch", "--targets", "sm_90a", "--dest", dest.string(), "--mirror",
             stall.url(), "--index-sha256", rel.index_sha256, "--low-speed-seconds", "60",
             "--retries", "0"},
            tmp / "kid.log");
  std::string prefix = rel.archive["sm_90a"] + ".tmp.";
  fs::path partial;
  for (int i = 0; i < 500 && partial.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::error_code ec;
    for (auto it = fs::directory_iterator(dest, ec); !ec && it != fs::directory_iterator(); ++it)
      if (it->path().filename().string().rfind(prefix, 0) == 0 && fs::file_size(it->path()) > 0)
        partial = it->path();
  }
  ASSERT_FALSE(partial.empty()) << read_file(tmp / "kid.log");
  kid.signal(SIGKILL);
  EXPECT_EQ(kid.wait(), -SIGKILL);
  // The partial download stays behind, under a name no reader accepts.
  EXPECT_TRUE(fs::exists(partial));
  EXPECT_FALSE(fs::exists(dest / rel.archive["sm_90a"]));
  EXPECT_FALSE(store::store_has_verified(dest, rel.stem("sm_90a")));
  // The next fetch (holding the lock, so the writer is known dead) removes it and installs.
  MisbehavingServer good(rel.dir, "ok");
  fetch::FetchResult r = fetch::fetch_targets(options({good.url()}), {"sm_90a"}, dest.string());
  EXPECT_EQ(r.installed.size(), 1u);
  EXPECT_FALSE(fs::exists(partial));
  expect_only_verified(dest, {rel.stem("sm_90a")});
}

TEST_F(Fetch, IndexWithoutTheTargetIsNotFoundListingWhatItHas) {
  MisbehavingServer s(rel.dir, "ok");
  auto [kind, msg] =
      error_of([&] { fetch::fetch_targets(options({s.url()}), {"sm_100f"}, dest.string()); });
  EXPECT_EQ(kind, ErrorKind::NotFound);
  EXPECT_CONTAINS(msg, "no archive for sm_100f");
  EXPECT_CONTAINS(msg, "sm_80, sm_90a");
}

// --- an archive's manifest against its index entry (issue 12, item 4) ------------------------

// Puts `bytes` where the index's `target` entry points and re-pins size, digest and index, as an
// index made by mistake (or by someone who controls it) would.
void repin(Release& rel, const std::string& target, const std::string& bytes) {
  fs::path ip = rel.dir / format::index_file_name("kiln-kernels", rel.version);
  format::Index idx = format::parse_index(read_file(ip), ip.string());
  for (auto& e : idx.archives)
    if (e.target == target) {
      write_file(rel.dir / e.file, bytes);
      e.size = bytes.size();
      e.sha256 = io::sha256_hex(bytes);
    }
  rel.index_json = format::index_to_json(idx);
  write_file(ip, rel.index_json);
  rel.index_sha256 = io::sha256_hex(rel.index_json);
}

TEST_F(Fetch, IndexPinningAnotherTargetsArchiveIsRefusedAsIntegrityAndLeavesNothing) {
  repin(rel, "sm_90a", read_file(rel.dir / rel.archive["sm_80"]));
  MisbehavingServer s(rel.dir, "ok");
  auto [kind, msg] =
      error_of([&] { fetch::fetch_targets(options({s.url()}), {"sm_90a"}, dest.string()); });
  EXPECT_EQ(kind, ErrorKind::Integrity);
  EXPECT_CONTAINS(msg, s.url() + rel.url_path("sm_90a"));
  EXPECT_CONTAINS(msg, "manifest target is sm_80");
  EXPECT_CONTAINS(msg,
                  s.url() + "/" + format::index_file_name("kiln-kernels", rel.version) + " says sm_90a");
  expect_only_verified(dest, {});  // no sm_80 directory, no archive, no temp file
  // The CLI: exit 3, the same words.
  auto r = test::run(test::kiln_cli() + " fetch --targets sm_90a --dest " + dest.string() +
                     " --mirror " + s.url() + " --index-sha256 " + rel.index_sha256 + " 2>&1");
  EXPECT_EQ(r.exit_code, exit_code(ErrorKind::Integrity)) << r.out;
  EXPECT_CONTAINS(r.out, "manifest target is sm_80");
  expect_only_verified(dest, {});
}

TEST_F(Fetch, IndexPinningAnArchiveOfAnotherReleaseIsRefusedAsStaleAndLeavesNothing) {
  // A well-formed archive for sm_90a whose manifest says release 0.0.1.
  test::ReleaseSpec old;
  old.version = "0.0.1";
  old.with_artifacts({{"axpy_dtype_f32", test::random_bytes(4096, 99)}});
  repin(rel, "sm_90a", read_file(test::write_release_archive(tmp / "old", old, "sm_90a")));
  MisbehavingServer s(rel.dir, "ok");
  auto [kind, msg] =
      error_of([&] { fetch::fetch_targets(options({s.url()}), {"sm_90a"}, dest.string()); });
  EXPECT_EQ(kind, ErrorKind::Stale);
  EXPECT_CONTAINS(msg, s.url() + rel.url_path("sm_90a"));
  EXPECT_CONTAINS(msg, "manifest package_version is 0.0.1");
  EXPECT_CONTAINS(msg, "says " + rel.version);
  expect_only_verified(dest, {});
  auto r = test::run(test::kiln_cli() + " fetch --targets sm_90a --dest " + dest.string() +
                     " --mirror " + s.url() + " --index-sha256 " + rel.index_sha256 + " 2>&1");
  EXPECT_EQ(r.exit_code, exit_code(ErrorKind::Stale)) << r.out;
  expect_only_verified(dest, {});
}

// --- deadlines (issue 12, item 5) ---------------------------------------------------------------

TEST_F(Fetch, DrippingMirrorIsAbandonedAtItsDeadlineAndTheSecondMirrorServes) {
  // 2 KiB/s: above the 1 KiB/s low-speed limit, so only the deadline stops it (~20 s otherwise).
  MisbehavingServer drip(rel.dir, "drip", {"--drip-rate", "2048"});
  MisbehavingServer good(rel.dir, "ok");
  fetch::FetchOptions o = options({drip.url(), good.url()});
  o.download_timeout_ms = 1500;
  o.download_min_rate = 1 << 30;  // the size adds nothing: a 1.5 s deadline
  auto t0 = Clock::now();
  fetch::FetchResult r = fetch::fetch_targets(o, {"sm_90a"}, dest.string());
  double took = seconds_since(t0);
  EXPECT_GE(took, 1.4);
  EXPECT_LT(took, 5.0);
  EXPECT_EQ(r.installed.size(), 1u);
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_EQ(r.failures[0].mirror, drip.url());
  EXPECT_CONTAINS(r.failures[0].what, "deadline passed");
  EXPECT_CONTAINS(r.failures[0].what, "deadline of 1500 ms");
  EXPECT_EQ(drip.count(rel.url_path("sm_90a")), 1);  // not retried
  EXPECT_EQ(good.count(rel.url_path("sm_90a")), 1);
  expect_only_verified(dest, {rel.stem("sm_90a")});
}

TEST_F(Fetch, DrippingIndexMovesTheCliToTheSecondMirror) {
  MisbehavingServer drip(rel.dir, "drip", {"--match", "index.json", "--drip-rate", "40"});
  MisbehavingServer good(rel.dir, "ok");
  auto t0 = Clock::now();
  auto r = test::run(test::kiln_cli() + " fetch --targets sm_90a --dest " + dest.string() +
                     " --mirror " + drip.url() + " --mirror " + good.url() + " --index-sha256 " +
                     rel.index_sha256 +
                     " --low-speed-bytes 1 --download-timeout 1 --min-rate 1000000000 2>&1");
  EXPECT_LT(seconds_since(t0), 5.0);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_CONTAINS(
      r.out, drip.url() + "/" + format::index_file_name("kiln-kernels", rel.version) + ": deadline passed");
  EXPECT_EQ(drip.count("/" + format::index_file_name("kiln-kernels", rel.version)), 1);
  expect_only_verified(dest, {rel.stem("sm_90a")});
}

TEST_F(Fetch, CommandDeadlineEndsADrippingFetchWithANetworkErrorNamingIt) {
  MisbehavingServer drip(rel.dir, "drip", {"--drip-rate", "2048"});
  fetch::FetchOptions o = options({drip.url()});
  o.timeout_ms = 2000;  // the per-request deadline (60 s + size) would allow ~20 s
  auto t0 = Clock::now();
  auto [kind, msg] = error_of([&] { fetch::fetch_targets(o, {"sm_90a", "sm_80"}, dest.string()); });
  double took = seconds_since(t0);
  EXPECT_GE(took, 1.9);
  EXPECT_LT(took, 5.0);
  EXPECT_EQ(kind, ErrorKind::Network);
  EXPECT_CONTAINS(msg, "passed its deadline of 2000 ms (--timeout");
  EXPECT_CONTAINS(msg, drip.url() + "/kiln-kernels-");
  expect_only_verified(dest, {});
  // The CLI: --timeout in seconds, exit 8.
  auto r = test::run(test::kiln_cli() + " fetch --targets sm_90a --dest " + dest.string() +
                     " --mirror " + drip.url() + " --index-sha256 " + rel.index_sha256 +
                     " --timeout 1.5 2>&1");
  EXPECT_EQ(r.exit_code, exit_code(ErrorKind::Network)) << r.out;
  EXPECT_CONTAINS(r.out, "passed its deadline of 1500 ms");
  expect_only_verified(dest, {});
}

// --- redirects (issue 12, item 8) -------------------------------------------------------------

TEST_F(Fetch, RedirectFromHttpToAnotherHostIsRefused) {
  MisbehavingServer other(rel.dir, "ok");
  // Same machine, another host name: what the rule looks at is the name kiln was given.
  std::string elsewhere = "http://localhost:" + other.url().substr(other.url().rfind(':') + 1);
  MisbehavingServer s(rel.dir, "redirect", {"--match", "kiln-kernels", "--redirect-to", elsewhere});
  auto [kind, msg] =
      error_of([&] { fetch::fetch_targets(options({s.url()}), {"sm_90a"}, dest.string()); });
  EXPECT_EQ(kind, ErrorKind::Network);
  EXPECT_CONTAINS(msg, "redirect refused");
  EXPECT_CONTAINS(msg, "to another host localhost");
  // --match kiln-kernels covers the index too: refused there, not retried, nothing else asked.
  EXPECT_CONTAINS(msg, s.url() + "/" + format::index_file_name("kiln-kernels", rel.version));
  EXPECT_EQ(s.count("/" + format::index_file_name("kiln-kernels", rel.version)), 1);
  EXPECT_EQ(s.count(rel.url_path("sm_90a")), 0);
  EXPECT_EQ(other.total(), 0);
  expect_only_verified(dest, {});
}

// libcurl reads "HTTP/2<TAB>302" as a 302 and follows its Location: the rule must hold for
// whatever status line libcurl takes as a redirect, not only for the usual spelling.
TEST_F(Fetch, RedirectToAnotherHostIsRefusedWhateverTheStatusLineLooksLike) {
  MisbehavingServer other(rel.dir, "ok");
  std::string elsewhere = "http://localhost:" + other.url().substr(other.url().rfind(':') + 1);
  MisbehavingServer s(rel.dir, "redirect-tab",
                      {"--match", "kiln-kernels", "--redirect-to", elsewhere});
  auto [kind, msg] =
      error_of([&] { fetch::fetch_targets(options({s.url()}), {"sm_90a"}, dest.string()); });
  EXPECT_EQ(kind, ErrorKind::Network);
  EXPECT_CONTAINS(msg, "redirect refused");
  EXPECT_CONTAINS(msg, "to another host localhost");
  EXPECT_EQ(other.total(), 0);
  expect_only_verified(dest, {});
}

TEST_F(Fetch, RedirectWithinTheSameHttpHostIsFollowed) {
  MisbehavingServer other(rel.dir, "ok");  // 127.0.0.1, another port
  MisbehavingServer s(rel.dir, "redirect",
                      {"--match", "kiln-kernels", "--redirect-to", other.url()});
  fetch::FetchResult r = fetch::fetch_targets(options({s.url()}), {"sm_90a"}, dest.string());
  EXPECT_EQ(r.installed.size(), 1u);
  EXPECT_EQ(other.count("/" + format::index_file_name("kiln-kernels", rel.version)), 1);
  EXPECT_EQ(other.count(rel.url_path("sm_90a")), 1);
  expect_only_verified(dest, {rel.stem("sm_90a")});
}

// --- throughput (scripts/bench_fetch.sh runs this) ---------------------------------------------

TEST(FetchBench, DISABLED_LargeArchiveFromNginxVersusCurl) {
  if (!have_tool("nginx") || !have_tool("openssl") || !have_tool("curl"))
    GTEST_SKIP() << "needs nginx, openssl and curl";
  std::size_t mb = 100;
  if (const char* env = std::getenv("KILN_BENCH_MB")) mb = std::stoul(env);
  TempDir tmp;
  // Two incompressible artifacts of mb/2 each: the archive is about mb MB.
  Release rel = make_release(tmp / "release", {"sm_90a"}, mb * 1024 * 1024 / 2, 1);
  TestCa ca(tmp / "ca");
  Nginx nginx(rel.dir, ca);
  std::uint64_t size = fs::file_size(rel.dir / rel.archive["sm_90a"]);
  double mib = static_cast<double>(size) / (1024.0 * 1024.0);
  auto report = [&](const std::string& what, double s) {
    std::printf("%-52s %7.3f s %8.1f MiB/s\n", what.c_str(), s, mib / s);
  };
  std::printf("archive: %.1f MiB\n", mib);
  for (const std::string& base : {nginx.http_url(), nginx.https_url()}) {
    std::string url = base + rel.url_path("sm_90a");
    auto t0 = Clock::now();
    auto c = test::run("curl -sS --fail --cacert " + ca.ca_pem.string() + " -o " +
                       (tmp / "curl.out").string() + " " + url);
    double curl_s = seconds_since(t0);
    ASSERT_EQ(c.exit_code, 0) << c.out;
    report("curl -o file " + base.substr(0, base.find(':')), curl_s);

    auto transport = transport::make_curl_transport();
    transport::TransferRequest req;
    req.url = url;
    req.ca_bundle = ca.ca_pem.string();
    io::Sha256 h;
    t0 = Clock::now();
    auto r = transport->get(req, [&](const char* d, std::size_t n) {
      h.update(d, n);
      return true;
    });
    double dl_s = seconds_since(t0);
    ASSERT_EQ(r.status, transport::TransferStatus::Ok);
    EXPECT_EQ(h.hex(), io::sha256_file(rel.dir / rel.archive["sm_90a"]));
    report("libkiln transport + SHA-256, no disk " + base.substr(0, base.find(':')), dl_s);

    fetch::FetchOptions o;
    o.mirrors = {base};
    o.index_sha256 = rel.index_sha256;
    o.ca_bundle = ca.ca_pem.string();
    fs::path dest = tmp / ("store-" + base.substr(0, base.find(':')));
    t0 = Clock::now();
    o.log = [t0](const std::string& line) {
      std::printf("  %6.3f s  %s\n", seconds_since(t0), line.c_str());
    };
    fetch::fetch_targets(o, {"sm_90a"}, dest.string());
    report("fetch_targets (download, verify, unpack) " + base.substr(0, base.find(':')),
           seconds_since(t0));
  }
}

// --- the mirror tier and `kiln fetch --device` choose among the targets the pinned index offers

using test::Cc90Driver;

// The real release's targets (ci/targets.txt): no sm_90 archive.
const std::vector<std::string> kShippedTargets = {"sm_80",  "sm_86",  "sm_89",     "sm_90a",
                                                  "sm_100", "sm_120", "compute_80"};

class MirrorTier : public Fetch {
 protected:
  void SetUp() override {
    transport::forget_bad_mirrors();
    rel = make_release(tmp / "release", kShippedTargets, 2000, 3, true);
    dest = tmp / "cache";
  }
  std::unique_ptr<Loader> loader(const std::string& mirror, std::shared_ptr<Cc90Driver> drv) {
    LoaderConfig cfg;
    cfg.cache_dir = dest.string();
    cfg.mirrors = {mirror};
    cfg.index_sha256 = rel.index_sha256;
    cfg.disable_jit = true;
    cfg.use_installed_store = false;
    plan::LoaderDeps d;  // the real fetch and index fetch, over loopback HTTP
    d.driver = std::move(drv);
    return make_loader(kiln::test::reference_description(), cfg, std::move(d));
  }
};

TEST_F(MirrorTier, EmptyNodeOnCc90FetchesSm90aFromAReleaseWithoutSm90) {
  MisbehavingServer s(rel.dir, "ok");
  auto drv = std::make_shared<Cc90Driver>();
  auto l = loader(s.url(), drv);
  const KernelHandle& h = l->get("axpy_dtype_f32");
  EXPECT_EQ(h.origin, (dest / rel.stem("sm_90a") / "axpy_dtype_f32.fatbin").string());
  ASSERT_EQ(drv->images.size(), 1u);
  EXPECT_EQ(drv->images[0], rel.artifacts["sm_90a"]["axpy_dtype_f32.fatbin"]);
  EXPECT_EQ(s.count(rel.url_path("sm_90a")), 1);
  for (const auto& t : kShippedTargets)
    if (t != "sm_90a") {
      EXPECT_EQ(s.count(rel.url_path(t)), 0) << t;
    }
  expect_only_verified(dest, {rel.stem("sm_90a")});
}

TEST_F(MirrorTier, MissingBestArchiveFallsBackToThePtxArchive) {
  // The sm_90a archive is gone from the only mirror (404): the tier goes on to compute_80.
  MisbehavingServer s(rel.dir, "404", {"--match", "sm_90a"});
  auto drv = std::make_shared<Cc90Driver>();
  auto l = loader(s.url(), drv);
  const KernelHandle& h = l->get("axpy_dtype_f32");
  EXPECT_EQ(h.origin, (dest / rel.stem("compute_80") / "axpy_dtype_f32.fatbin").string());
  EXPECT_EQ(drv->images,
            std::vector<std::string>{rel.artifacts["compute_80"]["axpy_dtype_f32.fatbin"]});
  EXPECT_EQ(s.count(rel.url_path("compute_80")), 1);
  expect_only_verified(dest, {rel.stem("compute_80")});
}

TEST_F(MirrorTier, AMirrorWithoutTheReleaseIsRejectedAsNotFoundNamingTheMissingIndex) {
  fs::create_directories(tmp / "empty");
  MisbehavingServer s(tmp / "empty", "ok");
  auto drv = std::make_shared<Cc90Driver>();
  std::string msg =
      test::error_of(ErrorKind::NotFound, [&] { loader(s.url(), drv)->get("axpy_dtype_f32"); });
  EXPECT_CONTAINS(msg, "[mirror] " + s.url() + ": no mirror served a trusted index");
  EXPECT_CONTAINS(msg, s.url() + "/" + rel.index_path.filename().string() + ": HTTP 404");
  EXPECT_CONTAINS(msg, "is not on these mirrors");
  EXPECT_EQ(s.count("/" + rel.index_path.filename().string()), 1);
  EXPECT_TRUE(drv->images.empty());
}

TEST_F(MirrorTier, TamperedArchiveOnTheFirstMirrorIsTakenFromTheSecond) {
  MisbehavingServer bad(rel.dir, "flip", {"--match", "sm_90a"});
  MisbehavingServer good(rel.dir, "ok");
  auto drv = std::make_shared<Cc90Driver>();
  LoaderConfig cfg;
  cfg.cache_dir = dest.string();
  cfg.mirrors = {bad.url(), good.url()};
  cfg.index_sha256 = rel.index_sha256;
  cfg.disable_jit = true;
  cfg.use_installed_store = false;
  plan::LoaderDeps d;
  d.driver = drv;
  std::unique_ptr<Loader> owned =
      make_loader(kiln::test::reference_description(), cfg, std::move(d));
  Loader& l = *owned;
  EXPECT_EQ(l.get("axpy_dtype_f32").origin,
            (dest / rel.stem("sm_90a") / "axpy_dtype_f32.fatbin").string());
  EXPECT_EQ(drv->images,
            std::vector<std::string>{rel.artifacts["sm_90a"]["axpy_dtype_f32.fatbin"]});
  EXPECT_EQ(bad.count(rel.url_path("sm_90a")), 1);
  EXPECT_EQ(good.count(rel.url_path("sm_90a")), 1);
  expect_only_verified(dest, {rel.stem("sm_90a")});
}

TEST_F(MirrorTier, CliFetchDeviceInstallsTheArchiveTheRuleChoosesAndOnlyIt) {
  MisbehavingServer s(rel.dir, "ok");
  auto r = test::run(test::kiln_cli() + " fetch --device sm_90 --json --dest " + dest.string() +
                     " --mirror " + s.url() + " --index-sha256 " + rel.index_sha256);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_CONTAINS(r.out, "sm_90a (exact SASS for CC 9.0 (arch-specific))");
  EXPECT_CONTAINS(r.out, "\"device\": \"sm_90\",\n  \"target\": \"sm_90a\"");
  EXPECT_EQ(s.count(rel.url_path("sm_90a")), 1);
  expect_only_verified(dest, {rel.stem("sm_90a")});
  // CC 8.7 (Jetson Orin): sm_86 SASS, the same major and a lower minor.
  auto r87 = test::run(test::kiln_cli() + " fetch --device 8.7 --dest " + dest.string() +
                       " --mirror " + s.url() + " --index-sha256 " + rel.index_sha256);
  ASSERT_EQ(r87.exit_code, 0) << r87.out;
  EXPECT_EQ(s.count(rel.url_path("sm_86")), 1);
  expect_only_verified(dest, {rel.stem("sm_90a"), rel.stem("sm_86")});
}

TEST_F(MirrorTier, CliFetchDeviceWithNothingThatRunsOrNoGpuIsUnsupported) {
  MisbehavingServer s(rel.dir, "ok");
  auto r = test::run(test::kiln_cli() + " fetch --device sm_75 --dest " + dest.string() +
                     " --mirror " + s.url() + " --index-sha256 " + rel.index_sha256);
  EXPECT_EQ(r.exit_code, exit_code(ErrorKind::Unsupported)) << r.out;
  EXPECT_CONTAINS(
      r.out, "no archive of release " + rel.package + " " + rel.version + " can run on CC 7.5");
  auto a =
      test::run("CUDA_VISIBLE_DEVICES= " + test::kiln_cli() + " fetch --device auto --dest " +
                dest.string() + " --mirror " + s.url() + " --index-sha256 " + rel.index_sha256);
  EXPECT_EQ(a.exit_code, exit_code(ErrorKind::Unsupported)) << a.out;
  EXPECT_CONTAINS(a.out, "--device auto");
  auto both = test::run(test::kiln_cli() + " fetch --device sm_90 --targets sm_90a --dest " +
                        dest.string());
  EXPECT_EQ(both.exit_code, exit_code(ErrorKind::Usage)) << both.out;
  expect_only_verified(dest, {});
}

}  // namespace
}  // namespace kiln
