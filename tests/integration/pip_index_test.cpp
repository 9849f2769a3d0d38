// The mirror is a pip index (docs/mirrors.md, "The mirror as a pip index"): a release staged with
// `kiln mirror stage` (kiln's runtime wheel, the package's wheel, two target wheels), served by
// nginx on loopback with autoindex off, and installed from with real pip into a fresh venv:
// `pip install --index-url <mirror>/simple/ "kiln-kernels[cu13-sm90a]"` (the HTML pages, the
// PEP 658 metadata files), then `python -m kiln install --index-url` from a server that
// negotiates the PEP 691 JSON (the nginx snippet docs/mirrors.md shows).
//
// Needs nginx and curl (scripts/bootstrap.sh), the runtime wheel (KILN_TEST_RUNTIME_WHEEL,
// ci/test.sh builds it once) and a CPython >= 3.12 (scripts/find_python312.sh). Without the wheel
// it skips, unless KILN_REQUIRE_PYTOOLS=1 (CI), where it fails.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "child_process.hpp"
#include "format/manifest.hpp"
#include "io/sha256.hpp"
#include "kiln/version.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"
#include "wheel/wheel.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using test::read_file;
using test::write_file;

std::string quote(const fs::path& p) { return "'" + p.string() + "'"; }

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

bool have_tool(const std::string& tool) {
  return test::run("command -v " + tool + " >/dev/null").exit_code == 0;
}

// nginx serving `root` on two loopback ports, autoindex off: `plain` serves index.html for a
// directory (what any static server does), `negotiated` serves index.json to a client that asks
// for PEP 691 JSON (Accept), with its media type.
class StaticServer {
 public:
  StaticServer(const fs::path& root, const fs::path& prefix) : prefix_(prefix) {
    const std::string P = prefix.string();
    fs::create_directories(prefix / "logs");
    for (int attempt = 0; attempt < 3 && !nginx_; ++attempt) {
      plain_ = test::free_port();
      negotiated_ = test::free_port();
      write_file(
          prefix / "nginx.conf",
          "daemon off;\nmaster_process off;\nworker_processes 1;\nerror_log " + P +
              "/logs/error.log;\npid " + P + "/logs/nginx.pid;\nevents {}\nhttp {\n" +
              "  include /etc/nginx/mime.types;\n  access_log " + P + "/logs/access.log;\n" +
              "  client_body_temp_path " + P + "/body;\n  proxy_temp_path " + P +
              "/proxy;\n  fastcgi_temp_path " + P + "/fcgi;\n  uwsgi_temp_path " + P +
              "/uwsgi;\n  scgi_temp_path " + P + "/scgi;\n  autoindex off;\n" +
              "  server {\n    listen 127.0.0.1:" + std::to_string(plain_) + ";\n    root " +
              root.string() + ";\n    index index.html;\n  }\n" +
              // The negotiation docs/mirrors.md shows.
              "  map $http_accept $simple_index {\n    default index.html;\n"
              "    \"~application/vnd\\.pypi\\.simple\\.v1\\+json\" index.json;\n  }\n"
              "  server {\n    listen 127.0.0.1:" +
              std::to_string(negotiated_) + ";\n    root " + root.string() +
              ";\n    location /simple/ {\n      index $simple_index;\n"
              "      types { application/vnd.pypi.simple.v1+json json; text/html html; }\n"
              "      add_header Vary Accept;\n    }\n  }\n}\n");
      nginx_ = std::make_unique<test::Child>(
          std::vector<std::string>{"nginx", "-p", P, "-c", P + "/nginx.conf"}, prefix / "stderr");
      bool up = false;
      for (int i = 0; i < 300 && nginx_->running() && !up; ++i) {
        up = test::run("curl -s -o /dev/null " + url(plain_) + "/simple/").exit_code == 0 &&
             test::run("curl -s -o /dev/null " + url(negotiated_) + "/simple/").exit_code == 0;
        if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (!up) nginx_.reset();
    }
  }
  bool up() const { return nginx_ != nullptr; }
  std::string plain() const { return url(plain_); }
  std::string negotiated() const { return url(negotiated_); }
  std::string log() const { return read_file(prefix_ / "logs" / "access.log"); }
  std::string errors() const {
    return read_file(prefix_ / "stderr") + read_file(prefix_ / "logs" / "error.log");
  }

 private:
  static std::string url(int port) { return "http://127.0.0.1:" + std::to_string(port); }
  fs::path prefix_;
  int plain_ = 0, negotiated_ = 0;
  std::unique_ptr<test::Child> nginx_;
};

TEST(PipIndex, PipInstallsAPackageWithItsTargetFromTheStagedMirrorOnAStaticServer) {
  const char* runtime = std::getenv("KILN_TEST_RUNTIME_WHEEL");
  if (!runtime || !*runtime) {
    const char* req = std::getenv("KILN_REQUIRE_PYTOOLS");
    if (req && std::string(req) == "1")
      FAIL() << "KILN_REQUIRE_PYTOOLS=1 but KILN_TEST_RUNTIME_WHEEL is not set: "
                "scripts/build_runtime_wheel.sh build/python-dist";
    GTEST_SKIP() << "KILN_TEST_RUNTIME_WHEEL is not set (scripts/build_runtime_wheel.sh)";
  }
  if (!have_tool("nginx") || !have_tool("curl"))
    GTEST_SKIP() << "nginx or curl is not installed (Debian: nginx-light curl)";
  auto py = test::run("bash " + std::string(KILN_TEST_SOURCE_DIR) +
                      "/scripts/find_python312.sh 2>/dev/null");
  ASSERT_EQ(py.exit_code, 0) << "no CPython >= 3.12: " << py.out;
  const std::string python = trim(py.out);

  test::TempDir tmp;
  const std::string ver = kiln::version();
  const fs::path dist = tmp.path() / "dist";
  // A release of kiln-kernels (two targets) with its wheels as `kiln wheel` makes them, and the
  // runtime wheel ci/test.sh built.
  test::ReleaseSpec rel;
  test::SyntheticDist d = test::write_release_dist(dist, rel, {"sm_80", "sm_90a"});
  std::vector<std::string> dists;
  for (const char* target : {"sm_80", "sm_90a"}) {
    auto members = test::release_members(rel, target);
    auto manifest = format::parse_manifest(members[0].data, "test");
    wheel::write_zip(dist / wheel::wheel_file_name("kiln-kernels", ver, d.cuda_version, target),
                     wheel::wheel_contents(manifest, members, ver), 1764403200);
    dists.push_back(wheel::distribution_name("kiln-kernels", d.cuda_version, target));
  }
  wheel::write_zip(dist / wheel::package_wheel_file_name("kiln-kernels", ver),
                   wheel::package_wheel_contents(
                       "kiln-kernels", ver,
                       {format::description_file_name("kiln-kernels", ver), "{}"}, ver, dists),
                   1764403200);
  fs::copy_file(runtime, dist / fs::path(runtime).filename());
  const fs::path mirror = tmp.path() / "mirror";
  auto r = test::run(test::kiln_cli() + " mirror stage " + quote(dist) + " --to " + quote(mirror));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  r = test::run(test::kiln_cli() + " mirror verify " + quote(mirror));
  ASSERT_EQ(r.exit_code, 0) << r.out;

  StaticServer server(mirror, tmp.path() / "nginx");
  ASSERT_TRUE(server.up()) << server.errors();
  // No listing anywhere: the mirror's root and a directory without index.html are refused.
  EXPECT_EQ(trim(test::run("curl -s -o /dev/null -w '%{http_code}' " + server.plain() + "/").out),
            "403");

  // The extra named by docs/wheels.md: the package, its sm_90a target wheel, the runtime.
  const std::string extra = dists[1].substr(std::string("kiln-kernels-").size());  // cu13-sm90a
  const fs::path venv = tmp.path() / "venv";
  r = test::run(quote(python) + " -m venv " + quote(venv));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string pip = quote(venv / "bin" / "python") +
                          " -m pip --disable-pip-version-check --no-cache-dir --no-input ";
  r = test::run(pip + "install --index-url " + server.plain() + "/simple/ 'kiln-kernels[" + extra +
                "]'");
  ASSERT_EQ(r.exit_code, 0) << r.out << server.log();
  auto installed = [&] {
    auto l = test::run(pip + "list --format json 2>/dev/null");
    std::map<std::string, std::string> m;
    for (const auto& p : Json::parse(l.out)) m[p["name"].get<std::string>()] = p["version"];
    return m;
  };
  auto m = installed();
  EXPECT_EQ(m["kiln-kernels"], ver);
  EXPECT_EQ(m[dists[1]], ver);
  EXPECT_EQ(m["kiln"], ver);
  EXPECT_EQ(m.count(dists[0]), 0u);
  // pip read the project pages and the PEP 658 metadata files, never a listing.
  const std::string log = server.log();
  EXPECT_CONTAINS(log, "GET /simple/kiln-kernels/ ");
  EXPECT_CONTAINS(log, "GET /" + wheel::wheel_file_name("kiln-kernels", ver, d.cuda_version,
                                                        "sm_90a") +
                           ".metadata ");

  // The negotiating server gives PEP 691 JSON to a client that asks for it, HTML otherwise.
  r = test::run("curl -s -D - -H 'Accept: application/vnd.pypi.simple.v1+json' " +
                server.negotiated() + "/simple/" + dists[0] + "/");
  EXPECT_CONTAINS(r.out, "Content-Type: application/vnd.pypi.simple.v1+json");
  EXPECT_CONTAINS(r.out, "\"hashes\": {\"sha256\": \"" +
                             io::sha256_file(mirror / wheel::wheel_file_name(
                                                          "kiln-kernels", ver, d.cuda_version,
                                                          "sm_80")) +
                             "\"}");
  r = test::run("curl -s -D - " + server.negotiated() + "/simple/");
  EXPECT_CONTAINS(r.out, "Content-Type: text/html");

  // python -m kiln install reads the index (JSON here) and installs the sm_80 target wheel.
  r = test::run(quote(venv / "bin" / "python") + " -m kiln install kiln-kernels --index-url " +
                server.negotiated() + "/simple/ --target sm_80 --json 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  Json plan = Json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(plan["available"], Json::array({"sm_80", "sm_90a"})) << r.out;
  EXPECT_EQ(plan["target"], "sm_80") << r.out;
  EXPECT_EQ(installed()[dists[0]], ver);
}

}  // namespace
}  // namespace kiln
