// `kiln tuf-repo` writes a repository that kiln's own TUF client accepts through file://
// URLs (the real transport), across a release, a scheduled re-sign and key rotations.
#include <gtest/gtest.h>

#include <ctime>

#include "test_util.hpp"
#include "tuf_repo.hpp"
#include "tuf_signer.hpp"
#include "tuf_updater.hpp"

namespace kiln::tuf {
namespace {

using nlohmann::json;
using test::TempDir;
namespace fs = std::filesystem;

class TufRepo : public ::testing::Test {
 protected:
  std::string cli(const std::string& args) {
    auto r =
        test::run(test::kiln_cli() + " tuf-repo --dir " + (dir_ / "repo").string() + " " + args);
    EXPECT_EQ(r.exit_code, 0) << args << ": " << r.out;
    return r.out;
  }
  int client(const std::string& args) {
    std::string base = test::kiln_cli() + " tuf-client --metadata-dir " +
                       (dir_ / "client").string() + " --metadata-url file://" +
                       (dir_ / "repo" / "metadata").string() + " ";
    last_ = test::run(base + args);
    return last_.exit_code;
  }
  std::int64_t client_version(const std::string& role) {
    return json::parse(test::read_file(dir_ / "client" / (role + ".json")))["signed"]["version"]
        .get<std::int64_t>();
  }
  TempDir dir_;
  test::RunResult last_;
};

TEST_F(TufRepo, ClientDownloadsAReleaseAndFollowsResignsAndRotations) {
  cli("--scheme ecdsa-sha2-nistp256 init");
  test::write_file(dir_ / "kiln-0.1.0-index.json", "{\"index\": true}\n");
  EXPECT_NE(
      cli("add " + (dir_ / "kiln-0.1.0-index.json").string()).find("target kiln-0.1.0-index.json"),
      std::string::npos);
  fs::create_directories(dir_ / "client");
  fs::create_directories(dir_ / "dl");
  ASSERT_EQ(client("init " + (dir_ / "repo" / "metadata" / "1.root.json").string()), 0);
  std::string dl = "--target-name kiln-0.1.0-index.json --target-base-url file://" +
                   (dir_ / "repo" / "targets").string() + " --target-dir " +
                   (dir_ / "dl").string() + " download";
  ASSERT_EQ(client(dl), 0) << last_.out;
  EXPECT_EQ(test::read_file(dir_ / "dl" / "kiln-0.1.0-index.json"), "{\"index\": true}\n");
  EXPECT_EQ(client_version("timestamp"), 2);

  cli("refresh");
  ASSERT_EQ(client("refresh"), 0) << last_.out;
  EXPECT_EQ(client_version("timestamp"), 3);
  EXPECT_EQ(client_version("snapshot"), 3);

  cli("rotate timestamp");
  cli("rotate root");
  ASSERT_EQ(client("refresh"), 0) << last_.out;
  EXPECT_EQ(client_version("root"), 3);
  EXPECT_EQ(client_version("timestamp"), 4);

  // A timestamp signed with the revoked key is refused.
  std::string old_pem = test::read_file(dir_ / "repo" / "keys" / "timestamp.pem.1.old");
  Signer old = Signer::from_private_pem(old_pem, "ecdsa-sha2-nistp256");
  json ts = json::parse(test::read_file(dir_ / "repo" / "metadata" / "timestamp.json"))["signed"];
  ts["version"] = 5;
  test::write_file(dir_ / "repo" / "metadata" / "timestamp.json", sign_metadata(ts, {&old}));
  EXPECT_EQ(client("refresh"), 1);
  EXPECT_NE(last_.out.find("signature threshold not met"), std::string::npos) << last_.out;
  EXPECT_EQ(client_version("timestamp"), 4);
}

TEST_F(TufRepo, InitRefusesAnExistingRepository) {
  cli("init");
  auto r = test::run(test::kiln_cli() + " tuf-repo --dir " + (dir_ / "repo").string() + " init");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("already a TUF repository"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kiln::tuf
