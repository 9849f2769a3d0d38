// `kiln tuf-repo` writes a repository that kiln's own TUF client accepts through file://
// URLs (the real transport), across a release, a scheduled re-sign, key rotations,
// revocations and thresholds; and refuses, before writing anything, what it cannot sign.
#include <gtest/gtest.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <set>

#include "io/private_key_scan.hpp"
#include "test_util.hpp"
#include "tuf/tuf_signer.hpp"
#include "tuf/tuf_updater.hpp"
#include "tuf_repo/tuf_repo.hpp"

namespace kiln::tuf {
namespace {

using nlohmann::json;
using test::TempDir;
namespace fs = std::filesystem;

class TufRepo : public ::testing::Test {
 protected:
  fs::path repo() const { return dir_ / "repo"; }
  // Where the keys go by default: beside the repository, never in it.
  fs::path keys() const { return tuf_repo::default_keys_dir(repo()); }
  test::RunResult repo_cmd(const std::string& args) {
    return test::run(test::kiln_cli() + " tuf-repo --dir " + repo().string() + " " + args);
  }
  std::string cli(const std::string& args) {
    auto r = repo_cmd(args);
    EXPECT_EQ(r.exit_code, 0) << args << ": " << r.out;
    return r.out;
  }
  int client(const std::string& args) {
    fs::create_directories(dir_ / "client");
    std::string base = test::kiln_cli() + " tuf-client --metadata-dir " +
                       (dir_ / "client").string() + " --metadata-url file://" +
                       (repo() / "metadata").string() + " ";
    last_ = test::run(base + args);
    return last_.exit_code;
  }
  int client_init() { return client("init " + (repo() / "metadata" / "1.root.json").string()); }
  int download(const std::string& target) {
    fs::create_directories(dir_ / "dl");
    return client("--target-name " + target + " --target-base-url file://" +
                  (repo() / "targets").string() + " --target-dir " + (dir_ / "dl").string() +
                  " download");
  }
  std::int64_t client_version(const std::string& role) {
    return json::parse(test::read_file(dir_ / "client" / (role + ".json")))["signed"]["version"]
        .get<std::int64_t>();
  }
  json repo_signed(const std::string& file) {
    return json::parse(test::read_file(repo() / "metadata" / file))["signed"];
  }
  // Every file under the repository's metadata/, name -> bytes.
  std::map<std::string, std::string> metadata_files() {
    std::map<std::string, std::string> out;
    for (const auto& e : fs::directory_iterator(repo() / "metadata"))
      out[e.path().filename().string()] = test::read_file(e.path());
    return out;
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
  ASSERT_EQ(client_init(), 0);
  ASSERT_EQ(download("kiln-0.1.0-index.json"), 0) << last_.out;
  EXPECT_EQ(test::read_file(dir_ / "dl" / "kiln-0.1.0-index.json"), "{\"index\": true}\n");
  EXPECT_EQ(client_version("timestamp"), 2);

  cli("refresh");
  ASSERT_EQ(client("refresh"), 0) << last_.out;
  EXPECT_EQ(client_version("timestamp"), 3);
  EXPECT_EQ(client_version("snapshot"), 3);

  std::string old_ts_id = repo_signed("root.json")["roles"]["timestamp"]["keyids"][0];
  std::string out = cli("rotate timestamp");
  EXPECT_NE(out.find("retired timestamp " + old_ts_id), std::string::npos) << out;
  cli("rotate root");
  ASSERT_EQ(client("refresh"), 0) << last_.out;
  EXPECT_EQ(client_version("root"), 3);
  // Rotating timestamp signs it twice: old and new keys before root 2, new ones after.
  EXPECT_EQ(client_version("timestamp"), 5);

  // A timestamp signed with the retired key is refused.
  fs::path old_pem = keys() / "online" / "retired" / "timestamp" / (old_ts_id + ".pem");
  Signer old = Signer::from_private_pem(test::read_file(old_pem), "ecdsa-sha2-nistp256");
  json ts = repo_signed("timestamp.json");
  ts["version"] = 6;
  test::write_file(repo() / "metadata" / "timestamp.json", sign_metadata(ts, {&old}));
  EXPECT_EQ(client("refresh"), 1);
  EXPECT_NE(last_.out.find("signed by a key not trusted for the role (revoked or unknown)"),
            std::string::npos)
      << last_.out;
  EXPECT_EQ(client_version("timestamp"), 5);
}

TEST_F(TufRepo, ThresholdsAndBothSchemesPerRoleAreWrittenAndAccepted) {
  std::string out = cli(
      "--keys root=3 --threshold root=2 --keys targets=2 --threshold targets=2 --keys "
      "snapshot=2 --scheme root=ecdsa-sha2-nistp256 --scheme snapshot=ecdsa-sha2-nistp256 init");
  json root = repo_signed("root.json");
  EXPECT_EQ(root["roles"]["root"]["threshold"], 2);
  EXPECT_EQ(root["roles"]["root"]["keyids"].size(), 3u);
  EXPECT_EQ(root["roles"]["targets"]["threshold"], 2);
  EXPECT_EQ(root["roles"]["snapshot"]["keyids"].size(), 2u);
  EXPECT_EQ(root["roles"]["snapshot"]["threshold"], 1);
  EXPECT_EQ(root["consistent_snapshot"], true);
  for (const auto& id : root["roles"]["root"]["keyids"]) {
    EXPECT_EQ(root["keys"][id.get<std::string>()]["scheme"], "ecdsa-sha2-nistp256");
    EXPECT_TRUE(
        fs::exists(keys() / "offline" / "root" / (id.get<std::string>() + ".pem")));
  }
  for (const auto& id : root["roles"]["timestamp"]["keyids"])
    EXPECT_EQ(root["keys"][id.get<std::string>()]["scheme"], "ed25519");
  EXPECT_EQ(json::parse(test::read_file(repo() / "metadata" / "1.root.json"))["signatures"].size(),
            3u);
  EXPECT_EQ(json::parse(test::read_file(repo() / "metadata" / "targets.json"))["signatures"].size(),
            2u);
  // One line per key, then the repository and its two key directories, each with its advice.
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 3 + 2 + 2 + 1 + 6) << out;

  test::write_file(dir_ / "a.whl", "wheel bytes");
  cli("add " + (dir_ / "a.whl").string());
  ASSERT_EQ(client_init(), 0);
  ASSERT_EQ(download("a.whl"), 0) << last_.out;
  EXPECT_EQ(test::read_file(dir_ / "dl" / "a.whl"), "wheel bytes");
}

TEST_F(TufRepo, AddTakesAReleaseDirectoryWithLengthsHashesAndHashPrefixedNames) {
  cli("init");
  fs::create_directories(dir_ / "rel" / "sub");
  test::write_file(dir_ / "rel" / "kiln-kernels-0.1.0-index.json", "{}");
  test::write_file(dir_ / "rel" / "kiln-0.1.0-SHA256SUMS", "sums\n");
  test::write_file(dir_ / "rel" / "sub" / "a.tar.zst", std::string(1000, 'z'));
  std::string out = cli("add " + (dir_ / "rel").string());
  EXPECT_NE(out.find("target sub/a.tar.zst"), std::string::npos) << out;
  json t = repo_signed("targets.json");
  ASSERT_EQ(t["targets"].size(), 3u);
  json a = t["targets"]["sub/a.tar.zst"];
  EXPECT_EQ(a["length"], 1000);
  std::string sha256 = a["hashes"]["sha256"];
  EXPECT_EQ(sha256, *hex_digest("sha256", std::string(1000, 'z')));
  EXPECT_EQ(a["hashes"]["sha512"], *hex_digest("sha512", std::string(1000, 'z')));
  // Consistent snapshots: hash-prefixed targets, versioned targets and snapshot metadata.
  EXPECT_EQ(test::read_file(repo() / "targets" / "sub" / (sha256 + ".a.tar.zst")),
            std::string(1000, 'z'));
  EXPECT_FALSE(fs::exists(repo() / "targets" / "sub" / "a.tar.zst"));
  EXPECT_EQ(test::read_file(repo() / "metadata" / "2.targets.json"),
            test::read_file(repo() / "metadata" / "targets.json"));
  EXPECT_TRUE(fs::exists(repo() / "metadata" / "1.targets.json"));
  EXPECT_TRUE(fs::exists(repo() / "metadata" / "2.snapshot.json"));
  ASSERT_EQ(client_init(), 0);
  ASSERT_EQ(download("sub/a.tar.zst"), 0) << last_.out;
  EXPECT_EQ(test::read_file(dir_ / "dl" / "sub%2Fa.tar.zst"), std::string(1000, 'z'));
}

TEST_F(TufRepo, WithoutConsistentSnapshotNamesArePlain) {
  cli("--no-consistent-snapshot init");
  test::write_file(dir_ / "x.bin", "x");
  cli("add " + (dir_ / "x.bin").string());
  EXPECT_EQ(repo_signed("root.json")["consistent_snapshot"], false);
  EXPECT_EQ(test::read_file(repo() / "targets" / "x.bin"), "x");
  EXPECT_FALSE(fs::exists(repo() / "metadata" / "2.targets.json"));
  ASSERT_EQ(client_init(), 0);
  ASSERT_EQ(download("x.bin"), 0) << last_.out;
}

TEST_F(TufRepo, RefreshNeedsOnlyTheOnlineKeysAndAddWithoutTargetsKeysWritesNothing) {
  cli("init");
  fs::rename(keys() / "offline", dir_ / "offline-usb");
  cli("refresh");
  EXPECT_EQ(repo_signed("timestamp.json")["version"], 2);
  EXPECT_EQ(repo_signed("snapshot.json")["version"], 2);

  auto before = metadata_files();
  test::write_file(dir_ / "y.bin", "y");
  auto r = repo_cmd("add " + (dir_ / "y.bin").string());
  EXPECT_EQ(r.exit_code, 6) << r.out;  // not-found
  EXPECT_NE(r.out.find("signing targets needs 1 of its 1 keys"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find((keys() / "offline" / "targets").string()), std::string::npos);
  EXPECT_EQ(metadata_files(), before);

  // With the offline keys brought back from where the operator keeps them, add works.
  r = repo_cmd("--offline-keys " + (dir_ / "offline-usb").string() + " add " +
               (dir_ / "y.bin").string());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(repo_signed("targets.json")["version"], 2);
}

TEST_F(TufRepo, OfflineAddSignsTargetsOnlyAndTheOnlineRefreshPublishesIt) {
  cli("init");
  fs::rename(keys() / "online", dir_ / "online-host");
  test::write_file(dir_ / "z.bin", "release 1");
  auto before = metadata_files();
  auto r = repo_cmd("add " + (dir_ / "z.bin").string());
  EXPECT_EQ(r.exit_code, 6) << r.out;
  EXPECT_NE(r.out.find("signing snapshot needs 1 of its 1 keys (threshold, root v1), found 0 in " +
                       (keys() / "online" / "snapshot").string()),
            std::string::npos)
      << r.out;
  EXPECT_EQ(metadata_files(), before);
  EXPECT_TRUE(fs::is_empty(repo() / "targets"));

  cli("--targets-only add " + (dir_ / "z.bin").string());
  EXPECT_EQ(repo_signed("targets.json")["version"], 2);
  EXPECT_EQ(repo_signed("snapshot.json")["meta"]["targets.json"]["version"], 1);

  // On the release host: only the online keys, and refresh publishes targets v2.
  fs::rename(keys() / "offline", dir_ / "offline-usb");
  cli("--online-keys " + (dir_ / "online-host").string() + " refresh");
  EXPECT_EQ(repo_signed("snapshot.json")["meta"]["targets.json"]["version"], 2);
  ASSERT_EQ(client_init(), 0);
  ASSERT_EQ(download("z.bin"), 0) << last_.out;
  EXPECT_EQ(test::read_file(dir_ / "dl" / "z.bin"), "release 1");
}

TEST_F(TufRepo, RootRotationWithoutAThresholdOfOldRootKeysWritesNothing) {
  cli("--keys root=3 --threshold root=2 init");
  json root = repo_signed("root.json");
  for (int i = 0; i < 2; ++i)
    fs::remove(keys() / "offline" / "root" /
               (root["roles"]["root"]["keyids"][i].get<std::string>() + ".pem"));
  auto before = metadata_files();
  auto r = repo_cmd("rotate root");
  EXPECT_EQ(r.exit_code, 6) << r.out;
  EXPECT_NE(r.out.find("signing root needs 2 of its 3 keys (threshold, root v1), found 1"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(metadata_files(), before);
  EXPECT_FALSE(fs::exists(repo() / "metadata" / "2.root.json"));
}

TEST_F(TufRepo, RootRotationIsSignedByThresholdsOfOldAndNewRoot) {
  cli("--keys root=3 --threshold root=2 init");
  std::string out = cli("rotate root");
  json v1 = repo_signed("1.root.json");
  json v2 = json::parse(test::read_file(repo() / "metadata" / "2.root.json"));
  EXPECT_EQ(v2["signed"]["version"], 2);
  EXPECT_EQ(v2["signatures"].size(), 6u);  // 3 old + 3 new
  for (const auto& id : v1["roles"]["root"]["keyids"]) {
    EXPECT_NE(out.find("retired root " + id.get<std::string>()), std::string::npos) << out;
    EXPECT_FALSE(v2["signed"]["keys"].contains(id.get<std::string>()));
  }
  ASSERT_EQ(client_init(), 0);
  ASSERT_EQ(client("refresh"), 0) << last_.out;
  EXPECT_EQ(client_version("root"), 2);
}

TEST_F(TufRepo, RevokeRemovesTheKeyAndRefusesToGoBelowTheThreshold) {
  cli("--keys snapshot=2 --threshold snapshot=2 init");
  json root = repo_signed("root.json");
  std::string id = root["roles"]["snapshot"]["keyids"][0];
  auto r = repo_cmd("revoke snapshot " + id.substr(0, 10));
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("role snapshot: threshold 2 is more than its 1 keys left"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(repo() / "metadata" / "2.root.json"));

  cli("--threshold snapshot=1 revoke snapshot " + id.substr(0, 10));
  json v2 = repo_signed("2.root.json");
  EXPECT_EQ(v2["roles"]["snapshot"]["keyids"].size(), 1u);
  EXPECT_EQ(v2["roles"]["snapshot"]["threshold"], 1);
  EXPECT_FALSE(v2["keys"].contains(id));
  EXPECT_TRUE(fs::exists(keys() / "online" / "retired" / "snapshot" / (id + ".pem")));

  r = repo_cmd("revoke snapshot deadbeef");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("keyid \"deadbeef\" matches 0 of its keys"), std::string::npos) << r.out;

  cli("--scheme ecdsa-sha2-nistp256 add-key timestamp");
  json v3 = repo_signed("3.root.json");
  EXPECT_EQ(v3["roles"]["timestamp"]["keyids"].size(), 2u);
  ASSERT_EQ(client_init(), 0);
  ASSERT_EQ(client("refresh"), 0) << last_.out;
  EXPECT_EQ(client_version("root"), 3);
}

// A rotation killed between root N+1 and the role's re-signing must leave metadata both roots
// accept (crash points, tests/crash/): the role's metadata are first signed by the old and the
// new keys together, then, after root N+1, by the new keys alone.
TEST_F(TufRepo, RotationSignsWithOldAndNewKeysBeforeTheNewRootAndNewOnesAfter) {
  cli("init");
  const std::int64_t before = repo_signed("snapshot.json")["version"].get<std::int64_t>();
  cli("rotate snapshot");
  auto keyids_of = [&](const std::string& root_file) {
    std::set<std::string> ids;
    const json root = repo_signed(root_file);
    for (const auto& id : root["roles"]["snapshot"]["keyids"]) ids.insert(id.get<std::string>());
    return ids;
  };
  auto signers_of = [&](std::int64_t version) {
    std::set<std::string> ids;
    auto doc = json::parse(
        test::read_file(repo() / "metadata" / (std::to_string(version) + ".snapshot.json")));
    for (const auto& sig : doc["signatures"]) ids.insert(sig["keyid"].get<std::string>());
    return ids;
  };
  std::set<std::string> old_keys = keyids_of("1.root.json"), new_keys = keyids_of("2.root.json");
  std::set<std::string> both = old_keys;
  both.insert(new_keys.begin(), new_keys.end());
  EXPECT_EQ(signers_of(before + 1), both);
  EXPECT_EQ(signers_of(before + 2), new_keys);
  ASSERT_EQ(client_init(), 0) << last_.out;
  EXPECT_EQ(client("refresh"), 0) << last_.out;
}

// A rotation killed after <N+1>.root.json but before root.json: clients already trust N+1, so
// the next command takes it as the current root (completing root.json) instead of publishing a
// second, different root N+1 that those clients would never accept (crash points).
TEST_F(TufRepo, ARootChangeKilledBeforeRootJsonIsCompletedByTheNextCommand) {
  cli("init");
  ASSERT_EQ(client_init(), 0) << last_.out;
  cli("rotate timestamp");
  const std::string v2 = test::read_file(repo() / "metadata" / "2.root.json");
  test::write_file(repo() / "metadata" / "root.json",
                   test::read_file(repo() / "metadata" / "1.root.json"));
  ASSERT_EQ(client("refresh"), 0) << last_.out;  // the client follows 2.root.json
  cli("refresh");
  EXPECT_EQ(test::read_file(repo() / "metadata" / "root.json"), v2);
  EXPECT_FALSE(fs::exists(repo() / "metadata" / "3.root.json"));
  EXPECT_EQ(client("refresh"), 0) << last_.out;
  EXPECT_EQ(client_version("root"), 2);
}

TEST_F(TufRepo, BadOptionsAreUsageErrorsNamingTheValue) {
  auto r = repo_cmd("--keys root=0 init");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("--keys root=0: \"0\" is not a count"), std::string::npos) << r.out;
  r = repo_cmd("--keys root=2 --threshold root=3 init");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("role root: threshold 3 is more than its 2 keys"), std::string::npos)
      << r.out;
  r = repo_cmd("--scheme rsassa-pss-sha256 init");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("scheme \"rsassa-pss-sha256\" cannot sign here"), std::string::npos);
  r = repo_cmd("--keys mirror=2 init");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("unknown role \"mirror\""), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(repo() / "metadata"));
}

TEST_F(TufRepo, InitRefusesAnExistingRepository) {
  cli("init");
  auto r = repo_cmd("init");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("already a TUF repository"), std::string::npos) << r.out;
}

// An init killed before its timestamp left a root.json and no repository a client can use
// (crash points, tests/crash/): the next init starts over instead of refusing, and the result is
// a repository a client updates from. An init that finished is still refused.
TEST_F(TufRepo, AnInitKilledBeforeItsTimestampStartsOverAndTheRepositoryWorks) {
  cli("init");
  fs::remove(repo() / "metadata" / "timestamp.json");
  test::write_file(repo() / "metadata" / "snapshot.json.tmp.0123456789abcdef", "half");
  cli("init");
  EXPECT_FALSE(fs::exists(repo() / "metadata" / "snapshot.json.tmp.0123456789abcdef"));
  ASSERT_EQ(client_init(), 0) << last_.out;
  EXPECT_EQ(client("refresh"), 0) << last_.out;
  auto r = repo_cmd("init");
  EXPECT_EQ(r.exit_code, 2);
}

// A command killed between a metadata file's write and its rename left "<file>.tmp.<16 hex>" in
// the published metadata/ (crash points): the next command removes it.
TEST_F(TufRepo, TheNextCommandRemovesTheTemporaryFilesOfAKilledOne) {
  cli("init");
  test::write_file(repo() / "metadata" / "2.targets.json.tmp.0123456789abcdef", "half");
  cli("refresh");
  EXPECT_FALSE(fs::exists(repo() / "metadata" / "2.targets.json.tmp.0123456789abcdef"));
}

// Every file under `root` whose bytes hold "PRIVATE KEY".
std::vector<std::string> files_holding_private_keys(const fs::path& root) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file() && test::read_file(e.path()).find("PRIVATE KEY") != std::string::npos)
      out.push_back(e.path().string());
  return out;
}

TEST_F(TufRepo, InitWritesNoPrivateKeyUnderTheRepositoryAndSaysWhereTheKeysWent) {
  std::string out = cli("--keys root=3 --threshold root=2 init");
  EXPECT_EQ(files_holding_private_keys(repo()), std::vector<std::string>{});
  EXPECT_EQ(keys(), fs::weakly_canonical(dir_.path()) / "repo.keys");
  EXPECT_EQ(files_holding_private_keys(keys()).size(), 6u);  // 3 root, 1 each other role
  EXPECT_NE(out.find("offline keys (root, targets):      " + (keys() / "offline").string()),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("move them to an offline machine"), std::string::npos) << out;
  EXPECT_NE(out.find("online keys (snapshot, timestamp): " + (keys() / "online").string()),
            std::string::npos)
      << out;

  // --json carries the same; every later action finds the keys the same way.
  fs::remove_all(repo());
  fs::remove_all(keys());
  auto r = repo_cmd("init --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  json j = json::parse(r.out);
  EXPECT_EQ(j["offline_keys"]["dir"], (keys() / "offline").string());
  EXPECT_EQ(j["online_keys"]["dir"], (keys() / "online").string());
  EXPECT_NE(j["offline_keys"]["advice"].get<std::string>().find("offline machine"),
            std::string::npos);
  ASSERT_EQ(j["keys"].size(), 4u);
  for (const auto& k : j["keys"]) {
    EXPECT_EQ(k["offline"], k["role"] == "root" || k["role"] == "targets") << k;
    EXPECT_EQ(fs::path(k["file"].get<std::string>()).parent_path().parent_path(),
              keys() / (k["offline"].get<bool>() ? "offline" : "online"));
  }
  test::write_file(dir_ / "kiln-0.1.0-index.json", "{}\n");
  cli("add " + (dir_ / "kiln-0.1.0-index.json").string());
  cli("refresh");
  cli("rotate timestamp");
  EXPECT_EQ(files_holding_private_keys(repo()), std::vector<std::string>{});
}

TEST_F(TufRepo, AKeyDirectoryInsideTheRepositoryOrHoldingItIsRefusedNamingBoth) {
  // Inside, directly, through --offline-keys, and through a symbolic link to the repository.
  fs::create_directories(repo());
  fs::create_directory_symlink(repo(), dir_ / "served");
  for (const std::string& keys_opt :
       {"--keys-dir " + (repo() / "keys").string(),
        "--offline-keys " + (repo() / "private").string(),
        "--keys-dir " + (dir_ / "served" / "keys").string(), "--keys-dir " + repo().string()}) {
    auto r = repo_cmd(keys_opt + " init");
    EXPECT_EQ(r.exit_code, 2) << keys_opt << ": " << r.out;
    EXPECT_NE(r.out.find("is inside the repository " + repo().string()), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("--keys-dir DIR (default " + keys().string()), std::string::npos)
        << r.out;
  }
  // The repository inside a key directory.
  auto r = repo_cmd("--offline-keys " + dir_.path().string() + " init");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("offline key directory " + dir_.path().string()), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("holds the repository " + repo().string()), std::string::npos) << r.out;
  EXPECT_TRUE(fs::is_empty(repo()));  // nothing written
  EXPECT_FALSE(fs::exists(repo() / "keys"));

  // Keys where kiln 0.1 put them are refused by every action, with the move to make.
  cli("init");
  fs::create_directories(repo() / "keys");
  fs::rename(keys() / "online", repo() / "keys" / "online");
  r = repo_cmd("refresh");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("mv " + (repo() / "keys").string() + " " + keys().string()),
            std::string::npos)
      << r.out;
}

TEST_F(TufRepo, AddRefusesToPublishAPrivateKeyNamingItAndWritesNothing) {
  cli("init");
  fs::path release = dir_ / "release";
  test::write_file(release / "kiln-0.1.0-index.json", "{}\n");
  test::write_file(release / "ops" / "deploy_key",
                   "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
                   "-----END OPENSSH PRIVATE KEY-----\n");
  auto before = metadata_files();
  auto r = repo_cmd("add " + release.string());
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find((release / "ops" / "deploy_key").string() + " is a private key"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("nothing was published"), std::string::npos) << r.out;
  EXPECT_EQ(metadata_files(), before);
  EXPECT_TRUE(fs::is_empty(repo() / "targets"));

  // A copy of a key file inside the repository itself (found by its name alone).
  fs::remove_all(release / "ops");
  fs::path targets_key = *fs::directory_iterator(keys() / "offline" / "targets");
  fs::create_directories(repo() / "backup");
  fs::copy_file(targets_key, repo() / "backup" / targets_key.filename());
  test::write_file(repo() / "backup" / targets_key.filename(), "renamed and re-encoded");
  r = repo_cmd("add " + release.string());
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find((repo() / "backup" / targets_key.filename()).string()), std::string::npos)
      << r.out;
  EXPECT_EQ(metadata_files(), before);
  fs::remove_all(repo() / "backup");
  cli("add " + release.string());
}

TEST(PrivateKeyScan, PemPrivateKeyHeadersAndKilnKeyNamesAreKeysAndCertificatesAreNot) {
  for (const char* label : {"PRIVATE KEY", "EC PRIVATE KEY", "RSA PRIVATE KEY",
                            "ENCRYPTED PRIVATE KEY", "OPENSSH PRIVATE KEY"})
    EXPECT_TRUE(io::holds_private_key_header(std::string("junk\n-----BEGIN ") + label + "-----\n"))
        << label;
  EXPECT_FALSE(io::holds_private_key_header("-----BEGIN CERTIFICATE-----\n"));
  EXPECT_FALSE(io::holds_private_key_header("-----BEGIN PUBLIC KEY-----\n"));
  EXPECT_FALSE(io::holds_private_key_header("-----BEGIN x PRIVATE KEY-----"));  // not a PEM label
  EXPECT_TRUE(io::is_tuf_key_file_name(std::string(64, 'a') + ".pem"));
  EXPECT_FALSE(io::is_tuf_key_file_name(std::string(64, 'a') + ".json"));
  EXPECT_FALSE(io::is_tuf_key_file_name(std::string(63, 'a') + ".pem"));
  EXPECT_FALSE(io::is_tuf_key_file_name(std::string(64, 'A') + ".pem"));
}

TEST(TufRepoRoleOptions, InitTakesEveryRoleOptionBareOrNamed) {
  tuf_repo::RoleOptions o;
  o.schemes = {"ecdsa-sha2-nistp256", "root=ed25519"};
  o.key_counts = {"root=3"};
  o.thresholds = {"root=2"};
  tuf_repo::InitOptions io = tuf_repo::init_options(o, false);
  EXPECT_FALSE(io.consistent_snapshot);
  EXPECT_EQ(io.roles["root"].scheme, "ed25519");
  EXPECT_EQ(io.roles["root"].keys, 3);
  EXPECT_EQ(io.roles["root"].threshold, 2);
  EXPECT_EQ(io.roles["targets"].scheme, "ecdsa-sha2-nistp256");
  o.key_counts = {"root=many"};
  EXPECT_THROW(tuf_repo::init_options(o, true), kiln::Error);
}

TEST(TufRepoRoleOptions, ARootChangeTakesTheSchemeAndThresholdOfItsRoleOnly) {
  tuf_repo::RoleOptions o;
  tuf_repo::RootChangeOptions rc =
      tuf_repo::root_change_options(tuf_repo::RootChange::Revoke, "targets", "abcd1234", true, o);
  EXPECT_EQ(rc.change, tuf_repo::RootChange::Revoke);
  EXPECT_EQ(rc.role, "targets");
  EXPECT_EQ(rc.keyid, "abcd1234");
  EXPECT_TRUE(rc.targets_only);
  EXPECT_EQ(rc.scheme, "");
  EXPECT_EQ(rc.threshold, 0);
  o.schemes = {"targets=ecdsa-sha2-nistp256"};
  o.thresholds = {"root=3"};
  rc = tuf_repo::root_change_options(tuf_repo::RootChange::Rotate, "targets", "", false, o);
  EXPECT_EQ(rc.scheme, "ecdsa-sha2-nistp256");
  EXPECT_EQ(rc.threshold, 0);  // another role's threshold
  o.thresholds = {"2"};
  EXPECT_EQ(
      tuf_repo::root_change_options(tuf_repo::RootChange::AddKey, "targets", "", false, o).threshold,
      2);
}

}  // namespace
}  // namespace kiln::tuf
