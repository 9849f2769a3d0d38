#pragma once
// tests/misbehaving_server/server.py as a child process on a loopback port the OS picked: a
// static file server that misbehaves on purpose (--mode flip, endless, 404, ... on the paths
// containing --match) and counts every request. One copy for every integration test.
#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "test_util.hpp"

namespace kiln::test {

class MisbehavingServer {
 public:
  // `extra`: more server.py arguments (--match, --fail-count, --tls-cert/--tls-key with
  // scheme "https", ...).
  MisbehavingServer(const std::filesystem::path& root, const std::string& mode,
                    const std::vector<std::string>& extra = {}, std::string scheme = "http")
      : scheme_(std::move(scheme)) {
    std::vector<std::string> argv = {
        "python3",      source_dir() + "/tests/misbehaving_server/server.py",
        "--root",       root.string(),
        "--port",       "0",
        "--port-file",  (dir_ / "port").string(),
        "--count-file", (dir_ / "count").string(),
        "--mode",       mode};
    argv.insert(argv.end(), extra.begin(), extra.end());
    child_ = std::make_unique<Child>(argv, dir_ / "log");
    for (int i = 0; i < 500 && !std::filesystem::exists(dir_ / "port"); ++i) {
      if (!child_->running())
        throw std::runtime_error("misbehaving server exited: " + read_file(dir_ / "log"));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!std::filesystem::exists(dir_ / "port"))
      throw std::runtime_error("misbehaving server did not start: " + read_file(dir_ / "log"));
    port_ = std::stoi(read_file(dir_ / "port"));
  }
  MisbehavingServer(const MisbehavingServer&) = delete;
  MisbehavingServer& operator=(const MisbehavingServer&) = delete;

  std::string url() const { return scheme_ + "://127.0.0.1:" + std::to_string(port_); }
  // Requests answered for `path` ("/metadata/timestamp.json"), and for all paths.
  int count(const std::string& path) const {
    auto j = counts();
    return j["paths"].contains(path) ? j["paths"][path].get<int>() : 0;
  }
  int total() const { return counts()["total"].get<int>(); }

 private:
  nlohmann::json counts() const {
    if (!std::filesystem::exists(dir_ / "count")) return {{"total", 0}, {"paths", {}}};
    return nlohmann::json::parse(read_file(dir_ / "count"));
  }
  TempDir dir_;
  std::string scheme_;
  int port_ = 0;
  std::unique_ptr<Child> child_;  // stopped on destruction
};

}  // namespace kiln::test
