// The TUF client core: canonical JSON, OpenSSL signatures of every scheme, delegation
// matching, and the client workflow against a repository built here with real keys. The
// workflow tests serve it through an in-memory Fetcher that records each request (the
// conformance suite checks the same sequence); the CurlFetcher tests and the CLI tests read a
// real repository through file:// URLs.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <map>

#include "test_util.hpp"
#include "tuf/tuf_delegation.hpp"
#include "tuf/tuf_metadata.hpp"
#include "tuf/tuf_signer.hpp"
#include "tuf/tuf_updater.hpp"

namespace kiln::tuf {
namespace {

using nlohmann::json;
using test::TempDir;
namespace fs = std::filesystem;

const std::time_t kNow = 1800000000;  // 2027-01-15
const char* kFuture = "2030-01-01T00:00:00Z";
const char* kPast = "2020-01-01T00:00:00Z";

template <typename F>
Attack attack_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.attack();
  }
  ADD_FAILURE() << "no tuf::Error thrown";
  return Attack::Network;
}

template <typename F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const kiln::Error& e) {
    return e.what();
  }
  return "(no error)";
}

// A small repository: top-level roles, each with one ecdsa key (the suite's default type).
class TestRepo {
 public:
  TestRepo() {
    for (const char* role : {"root", "timestamp", "snapshot", "targets"})
      keys_.emplace(role, Signer::generate("ecdsa-sha2-nistp256"));
    root = {{"_type", "root"},        {"spec_version", "1.0.34"},     {"version", 1},
            {"expires", kFuture},     {"consistent_snapshot", false}, {"keys", json::object()},
            {"roles", json::object()}};
    for (auto& [role, s] : keys_) {
      root["keys"][s.keyid()] = key_to_json(s.public_key());
      root["roles"][role] = {{"keyids", {s.keyid()}}, {"threshold", 1}};
    }
    targets = {{"_type", "targets"},
               {"spec_version", "1.0.34"},
               {"version", 1},
               {"expires", kFuture},
               {"targets", json::object()}};
    snapshot = {{"_type", "snapshot"},
                {"spec_version", "1.0.34"},
                {"version", 1},
                {"expires", kFuture},
                {"meta", {{"targets.json", {{"version", 1}}}}}};
    timestamp = {{"_type", "timestamp"},
                 {"spec_version", "1.0.34"},
                 {"version", 1},
                 {"expires", kFuture},
                 {"meta", {{"snapshot.json", {{"version", 1}}}}}};
    publish_root();
    publish("targets");
    publish("snapshot");
    publish("timestamp");
  }

  Signer& key(const std::string& role) { return keys_.at(role); }
  void set_key(const std::string& role, Signer s) {
    keys_.erase(role);
    keys_.emplace(role, std::move(s));
  }

  json& role(const std::string& name) {
    if (name == "root") return root;
    if (name == "timestamp") return timestamp;
    if (name == "snapshot") return snapshot;
    return targets;
  }
  void publish_root(std::vector<const Signer*> signers = {}) {
    if (signers.empty()) signers = {&key("root")};
    std::string bytes = sign_metadata(root, signers);
    files[std::to_string(root["version"].get<int>()) + ".root.json"] = bytes;
  }
  void publish(const std::string& name, std::vector<const Signer*> signers = {}) {
    if (signers.empty()) signers = {&key(name)};
    files[name + ".json"] = sign_metadata(role(name), signers);
  }
  // Bumps targets, snapshot and timestamp versions consistently and publishes them.
  void publish_release() {
    targets["version"] = targets["version"].get<int>() + 1;
    snapshot["meta"]["targets.json"]["version"] = targets["version"];
    snapshot["version"] = snapshot["version"].get<int>() + 1;
    timestamp["meta"]["snapshot.json"]["version"] = snapshot["version"];
    timestamp["version"] = timestamp["version"].get<int>() + 1;
    publish("targets");
    publish("snapshot");
    publish("timestamp");
  }
  void add_target(const std::string& path, const std::string& data) {
    targets["targets"][path] = {{"length", data.size()},
                                {"hashes", {{"sha256", *hex_digest("sha256", data)}}}};
    target_files[path] = data;
  }
  std::string initial_root() const { return files.at("1.root.json"); }

  json root, timestamp, snapshot, targets;
  std::map<std::string, std::string> files;         // metadata name -> bytes
  std::map<std::string, std::string> target_files;  // target path -> bytes

 private:
  std::map<std::string, Signer> keys_;
};

// Serves a TestRepo under "meta/" and "targets/", records each request, enforces max_bytes.
class RepoFetcher : public Fetcher {
 public:
  explicit RepoFetcher(const TestRepo& repo) : repo_(repo) {}
  std::optional<std::string> get(const std::string& url, std::size_t max_bytes) override {
    requests.push_back(url);
    const std::map<std::string, std::string>* m = nullptr;
    std::string name;
    if (url.rfind("meta/", 0) == 0) {
      m = &repo_.files;
      name = url.substr(5);
    } else if (url.rfind("targets/", 0) == 0) {
      m = &repo_.target_files;
      name = url.substr(8);
    }
    if (!m || !m->count(name)) return std::nullopt;
    const std::string& body = m->at(name);
    if (body.size() > max_bytes) throw Error(Attack::TooLarge, url + " too large");
    return body;
  }
  bool stream(const std::string& url, std::size_t max_bytes,
              const std::function<bool(const char*, std::size_t)>& sink) override {
    auto body = get(url, max_bytes);
    if (!body) return false;
    return sink(body->data(), body->size());
  }
  std::vector<std::string> requests;

 private:
  const TestRepo& repo_;
};

class TufClient : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_ / "metadata");
    fs::create_directories(dir_ / "targets");
    test::write_file(dir_ / "metadata" / "root.json", repo.initial_root());
  }
  UpdaterOptions options() {
    UpdaterOptions o;
    o.metadata_dir = dir_ / "metadata";
    o.metadata_url = "meta";
    o.target_dir = dir_ / "targets";
    o.target_base_url = "targets";
    return o;
  }
  void refresh(std::time_t now = kNow) {
    Updater u(options(), fetcher, now);
    u.refresh();
  }
  std::int64_t stored_version(const std::string& role) {
    fs::path p = dir_ / "metadata" / (role + ".json");
    if (!fs::exists(p)) return 0;
    return json::parse(test::read_file(p))["signed"]["version"].get<std::int64_t>();
  }
  std::vector<std::string> target_dir_files() {
    std::vector<std::string> out;
    for (auto& e : fs::directory_iterator(dir_ / "targets"))
      out.push_back(e.path().filename().string());
    return out;
  }

  TempDir dir_;
  TestRepo repo;
  RepoFetcher fetcher{repo};
};

TEST(TufCanonicalJson, SortsKeysAndEscapesOnlyQuoteAndBackslash) {
  json j = json::parse(R"({"b":1,"a":"x\"y\\z\n\u00e9","c":[true,null,-3]})");
  EXPECT_EQ(canonical_json(j), "{\"a\":\"x\\\"y\\\\z\n\xc3\xa9\",\"b\":1,\"c\":[true,null,-3]}");
}

TEST(TufCanonicalJson, RefusesFloatingPointNumbers) {
  EXPECT_EQ(attack_of([] { canonical_json(json::parse(R"({"a":1.5})")); }), Attack::Malformed);
}

TEST(TufCanonicalJson, AFloatInAnEnvelopeIsMalformedNamingTheFile) {
  // Found by fuzz/tuf_metadata_fuzz.cpp: the refusal did not say which file held the float.
  try {
    parse_envelope(R"({"signed":{"_type":"targets","x":[1.5]},"signatures":[]})",
                   "https://m.example/metadata/2.targets.json");
    FAIL() << "a float accepted";
  } catch (const tuf::Error& e) {
    EXPECT_EQ(e.attack(), Attack::Malformed);
    EXPECT_NE(std::string(e.what()).find("https://m.example/metadata/2.targets.json: \"signed\": "
                                         "canonical JSON has no floating-point numbers (found 1.5)"),
              std::string::npos)
        << e.what();
  }
}

TEST(TufSignatures, EachSchemeVerifiesItsOwnSignatureAndRefusesAlteredData) {
  for (const char* scheme :
       {"ed25519", "ecdsa-sha2-nistp256", "rsassa-pss-sha256", "rsa-pkcs1v15-sha256"}) {
    SCOPED_TRACE(scheme);
    Signer s = Signer::generate(scheme);
    std::string sig = s.sign("payload");
    EXPECT_TRUE(verify_signature(s.public_key(), sig, "payload"));
    EXPECT_FALSE(verify_signature(s.public_key(), sig, "payloaD"));
    std::string flipped = sig;
    flipped[flipped.size() / 2] ^= 1;
    EXPECT_FALSE(verify_signature(s.public_key(), flipped, "payload"));
    // The same key under another scheme name verifies nothing.
    Key other = s.public_key();
    other.scheme = other.scheme == "rsassa-pss-sha256" ? "rsa-pkcs1v15-sha256" : "ed25519";
    if (other.scheme != s.public_key().scheme) {
      EXPECT_FALSE(verify_signature(other, sig, "payload"));
    }
  }
}

TEST(TufSignatures, PrivateKeyPemRoundTripsToTheSameKeyid) {
  Signer a = Signer::generate("ed25519");
  Signer b = Signer::from_private_pem(a.private_pem(), "ed25519");
  EXPECT_EQ(a.keyid(), b.keyid());
  EXPECT_TRUE(verify_signature(a.public_key(), b.sign("x"), "x"));
}

TEST(TufHashes, MultiHasherOverChunksGivesEachAlgorithmsDigestOfTheWhole) {
  const std::string data(10000, 'k');
  MultiHasher hasher({{"sha256", ""}, {"sha512", ""}}, "test stream");
  for (std::size_t at = 0; at < data.size(); at += 3000)
    hasher.update(std::string_view(data).substr(at, 3000));
  EXPECT_EQ(hasher.finish(),
            (std::map<std::string, std::string>{{"sha256", *hex_digest("sha256", data)},
                                                {"sha512", *hex_digest("sha512", data)}}));
}

TEST(TufHashes, MultiHasherRefusesAnUnknownAlgorithmNamingIt) {
  auto make = [] { MultiHasher hasher({{"sha256", ""}, {"md5", ""}}, "target k.bin"); };
  EXPECT_EQ(attack_of(make), Attack::Malformed);
  EXPECT_EQ(message_of(make),
            "tuf: malformed metadata: target k.bin: unsupported hash algorithm \"md5\"");
}

TEST(TufDelegation, PathPatternsMatchSegmentBySegment) {
  EXPECT_TRUE(path_matches_pattern("a/b.txt", "a/*.txt"));
  EXPECT_FALSE(path_matches_pattern("a/b/c.txt", "a/*.txt"));
  EXPECT_FALSE(path_matches_pattern("a/b.txt", "*"));
  EXPECT_TRUE(path_matches_pattern("file1.bin", "file?.bin"));
  EXPECT_FALSE(path_matches_pattern("file12.bin", "file?.bin"));
  EXPECT_TRUE(path_matches_pattern("bx", "[ab]x"));
  EXPECT_FALSE(path_matches_pattern("ax", "[!a]x"));
  EXPECT_TRUE(path_matches_pattern("team-a/x", "team-*/*"));
}

TEST(TufDelegation, SuccinctRoleNamesAreTheHashBinOfThePath) {
  // Expected names from Python: sha256(path)[:4] >> (32 - bit_length), zero-padded hex.
  SuccinctRoles s;
  s.name_prefix = "bin";
  s.bit_length = 8;
  EXPECT_EQ(succinct_role_for_target(s, "foo"), "bin-2c");
  s.bit_length = 12;
  EXPECT_EQ(succinct_role_for_target(s, "team-a/x.bin"), "bin-52e");
  EXPECT_TRUE(is_succinct_role(s, "bin-52e"));
  EXPECT_FALSE(is_succinct_role(s, "bin-52"));
  s.bit_length = 1;
  EXPECT_EQ(succinct_role_for_target(s, "foo"), "bin-0");
}

TEST(TufAttacks, EachAttackHasItsWordsIdAndKind) {
  struct Row {
    Attack attack;
    const char* words;
    const char* id;
    ErrorKind kind;
  };
  const Row rows[] = {
      {Attack::Malformed, "malformed metadata", "malformed", ErrorKind::Format},
      {Attack::WrongType, "wrong role type", "wrong-type", ErrorKind::Format},
      {Attack::BadSignature, "signature threshold not met", "threshold", ErrorKind::Integrity},
      {Attack::UntrustedKey, "signed by a key not trusted for the role (revoked or unknown)",
       "untrusted-key", ErrorKind::Integrity},
      {Attack::RootVersionGap, "root version not sequential", "root-version-gap",
       ErrorKind::Integrity},
      {Attack::Rollback, "rollback", "rollback", ErrorKind::Integrity},
      {Attack::EqualVersion, "equal version", "equal-version", ErrorKind::Integrity},
      {Attack::Expired, "expired metadata (freeze)", "freeze", ErrorKind::Integrity},
      {Attack::SnapshotMismatch, "snapshot differs from timestamp", "snapshot-mismatch",
       ErrorKind::Integrity},
      {Attack::MixAndMatch, "targets role differs from snapshot (mix-and-match)", "mix-and-match",
       ErrorKind::Integrity},
      {Attack::TooLarge, "response too large (endless data)", "endless-data", ErrorKind::Integrity},
      {Attack::TargetMismatch, "target bytes differ from metadata", "target-mismatch",
       ErrorKind::Integrity},
      {Attack::NotDelegated, "role not delegated", "not-delegated", ErrorKind::Integrity},
      {Attack::TargetNotFound, "target not found", "target-not-found", ErrorKind::NotFound},
      {Attack::Network, "repository unreachable", "unreachable", ErrorKind::Network},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.id);
    EXPECT_STREQ(to_string(r.attack), r.words);
    EXPECT_STREQ(attack_id(r.attack), r.id);
    Error e(r.attack, "detail");
    EXPECT_EQ(e.kind(), r.kind);
    EXPECT_EQ(std::string(e.what()), std::string("tuf: ") + r.words + ": detail");
    ASSERT_NE(e.field("attack"), nullptr);
    EXPECT_EQ(*e.field("attack"), r.id);
  }
}

TEST(TufFreeze, ARolePastItsExpiresIsRefusedNamingFileVersionAndDate) {
  Common snapshot;
  snapshot.version = 3;
  snapshot.expires_text = kPast;
  snapshot.expires = *parse_utc_time(kPast);
  EXPECT_NO_THROW(refuse_if_expired(snapshot, "snapshot.json", snapshot.expires - 1));
  try {
    refuse_if_expired(snapshot, "snapshot.json", snapshot.expires);
    ADD_FAILURE() << "an expired snapshot was not refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.attack(), Attack::Expired);
    EXPECT_STREQ(e.what(),
                 "tuf: expired metadata (freeze): snapshot.json v3: field \"expires\" is "
                 "2020-01-01T00:00:00Z, now is past it: this node's clock reads "
                 "2020-01-01T00:00:00Z, 0 minutes later. Either the metadata has expired (the "
                 "repository was not re-signed in time, or it is being replayed) or this node's "
                 "clock is wrong: if `date -u` is not the real time, set the clock right and try "
                 "again");
    ASSERT_NE(e.field("attack"), nullptr);
    EXPECT_EQ(*e.field("attack"), "freeze");
  }
}

TEST_F(TufClient, RefreshStoresTopLevelRolesAfterTheSpecsRequests) {
  refresh();
  EXPECT_EQ(fetcher.requests,
            (std::vector<std::string>{"meta/2.root.json", "meta/timestamp.json",
                                      "meta/snapshot.json", "meta/targets.json"}));
  for (const char* role : {"root", "timestamp", "snapshot", "targets"})
    EXPECT_EQ(stored_version(role), 1) << role;
  // A second refresh with nothing new reuses the stored snapshot and targets.
  fetcher.requests.clear();
  refresh();
  EXPECT_EQ(fetcher.requests,
            (std::vector<std::string>{"meta/2.root.json", "meta/timestamp.json"}));
}

// A client killed while writing its metadata leaves "<role>.json.tmp.<16 hex>": the next client
// to take the directory's lock removes it (crash points, tests/crash/).
TEST_F(TufClient, TemporaryFilesOfAKilledClientAreRemovedByTheNext) {
  test::write_file(dir_ / "metadata" / "timestamp.json.tmp.0123456789abcdef", "{\"half");
  refresh();
  EXPECT_FALSE(fs::exists(dir_ / "metadata" / "timestamp.json.tmp.0123456789abcdef"));
  EXPECT_EQ(stored_version("timestamp"), 1);
}

TEST_F(TufClient, ConsistentSnapshotRequestsVersionedNames) {
  repo.root["consistent_snapshot"] = true;
  repo.root["version"] = 2;
  repo.publish_root();
  repo.files["1.snapshot.json"] = repo.files["snapshot.json"];
  repo.files["1.targets.json"] = repo.files["targets.json"];
  refresh();
  EXPECT_EQ(fetcher.requests,
            (std::vector<std::string>{"meta/2.root.json", "meta/3.root.json", "meta/timestamp.json",
                                      "meta/1.snapshot.json", "meta/1.targets.json"}));
  EXPECT_EQ(stored_version("root"), 2);
}

TEST_F(TufClient, TimestampRollbackIsRefusedAndTheStoredOneKept) {
  repo.publish_release();
  refresh();
  ASSERT_EQ(stored_version("timestamp"), 2);
  repo.timestamp["version"] = 1;
  repo.publish("timestamp");
  std::string msg = message_of([&] { refresh(); });
  EXPECT_EQ(attack_of([&] { refresh(); }), Attack::Rollback);
  EXPECT_NE(msg.find("timestamp.json: field \"version\" is 1, trusted version is 2"),
            std::string::npos)
      << msg;
  EXPECT_EQ(stored_version("timestamp"), 2);
}

TEST_F(TufClient, SnapshotRollbackOfATargetsVersionIsRefused) {
  repo.publish_release();
  refresh();
  // A newer snapshot that names an older targets version: rollback of targets.
  repo.snapshot["version"] = 3;
  repo.snapshot["meta"]["targets.json"]["version"] = 1;
  repo.timestamp["version"] = 3;
  repo.timestamp["meta"]["snapshot.json"]["version"] = 3;
  repo.publish("snapshot");
  repo.publish("timestamp");
  EXPECT_EQ(attack_of([&] { refresh(); }), Attack::Rollback);
  EXPECT_EQ(stored_version("snapshot"), 2);
}

TEST_F(TufClient, ExpiredTimestampIsAFreezeAndIsNotStored) {
  refresh();
  repo.timestamp["version"] = 2;
  repo.timestamp["expires"] = kPast;
  repo.publish("timestamp");
  std::string msg = message_of([&] { refresh(); });
  EXPECT_EQ(attack_of([&] { refresh(); }), Attack::Expired);
  EXPECT_NE(msg.find("field \"expires\" is 2020-01-01T00:00:00Z"), std::string::npos) << msg;
  EXPECT_EQ(stored_version("timestamp"), 1);
  // The same repository read at a time before that expiry is fine.
  EXPECT_NO_THROW(refresh(1500000000));
}

TEST_F(TufClient, RootRotatedWithTooFewSignaturesIsRefused) {
  Signer new_root = Signer::generate("ed25519");
  repo.root["version"] = 2;
  repo.root["keys"][new_root.keyid()] = key_to_json(new_root.public_key());
  repo.root["roles"]["root"]["keyids"] = {new_root.keyid()};
  repo.publish_root({&new_root});  // not signed by root v1's key
  std::string msg = message_of([&] { refresh(); });
  EXPECT_EQ(attack_of([&] { refresh(); }), Attack::UntrustedKey);
  EXPECT_NE(msg.find("root.json v2 has 0 valid signature(s) from the keys trusted root v1"),
            std::string::npos)
      << msg;
  EXPECT_EQ(stored_version("root"), 1);
  // Signed by both the old and the new key, it is accepted.
  repo.publish_root({&repo.key("root"), &new_root});
  refresh();
  EXPECT_EQ(stored_version("root"), 2);
}

TEST_F(TufClient, RootWithAVersionGapIsRefused) {
  repo.root["version"] = 3;
  std::string bytes = sign_metadata(repo.root, {&repo.key("root")});
  repo.files["2.root.json"] = bytes;
  EXPECT_EQ(attack_of([&] { refresh(); }), Attack::RootVersionGap);
  EXPECT_EQ(stored_version("root"), 1);
}

TEST_F(TufClient, RevokedTimestampKeyNoLongerSigns) {
  refresh();
  Signer fresh = Signer::generate("ecdsa-sha2-nistp256");
  Signer old = Signer::from_private_pem(repo.key("timestamp").private_pem(), "ecdsa-sha2-nistp256");
  repo.root["version"] = 2;
  repo.root["keys"].erase(old.keyid());
  repo.root["keys"][fresh.keyid()] = key_to_json(fresh.public_key());
  repo.root["roles"]["timestamp"]["keyids"] = {fresh.keyid()};
  repo.publish_root();
  repo.timestamp["version"] = 2;
  repo.publish("timestamp", {&old});
  EXPECT_EQ(attack_of([&] { refresh(); }), Attack::UntrustedKey);
  EXPECT_EQ(stored_version("root"), 2);
  EXPECT_EQ(stored_version("timestamp"), 1);
  // Fast-forward recovery: with the new key, even a timestamp v1 (after a v1 from the old
  // key) is accepted, since the stored one no longer verifies.
  repo.timestamp["version"] = 1;
  repo.publish("timestamp", {&fresh});
  refresh();
  EXPECT_EQ(stored_version("timestamp"), 1);
}

TEST_F(TufClient, SnapshotOtherThanTheTimestampNamesIsRefused) {
  repo.timestamp["version"] = 2;
  repo.timestamp["meta"]["snapshot.json"]["version"] = 2;  // snapshot v2 never published
  repo.publish("timestamp");
  EXPECT_EQ(attack_of([&] { refresh(); }), Attack::SnapshotMismatch);
  EXPECT_EQ(stored_version("snapshot"), 0);
}

TEST_F(TufClient, SnapshotWithOtherBytesThanTheTimestampHashIsRefused) {
  repo.timestamp["version"] = 2;
  repo.timestamp["meta"]["snapshot.json"]["hashes"] = {{"sha256", std::string(64, '0')}};
  repo.publish("timestamp");
  std::string msg = message_of([&] { refresh(); });
  EXPECT_NE(msg.find("sha256 is " + *hex_digest("sha256", repo.files["snapshot.json"]) +
                     ", metadata says 0000"),
            std::string::npos)
      << msg;
  EXPECT_EQ(stored_version("snapshot"), 0);
}

TEST_F(TufClient, TargetsFromAnotherReleaseIsMixAndMatch) {
  std::string old_targets = repo.files["targets.json"];
  repo.publish_release();
  repo.files["targets.json"] = old_targets;  // snapshot names v2, the mirror serves v1
  EXPECT_EQ(attack_of([&] { refresh(); }), Attack::MixAndMatch);
  EXPECT_EQ(stored_version("targets"), 0);
}

TEST_F(TufClient, OversizedTimestampIsRefusedAsEndlessData) {
  repo.timestamp["padding"] = std::string(20000, 'x');
  repo.publish("timestamp");
  EXPECT_EQ(attack_of([&] { refresh(); }), Attack::TooLarge);
  EXPECT_EQ(stored_version("timestamp"), 0);
}

TEST_F(TufClient, DownloadsAVerifiedTargetOnceThenUsesTheCachedCopy) {
  repo.add_target("dir/kernels.tar.zst", "kernel bytes");
  repo.publish_release();
  Updater u(options(), fetcher, kNow);
  auto info = u.get_targetinfo("dir/kernels.tar.zst");
  ASSERT_TRUE(info);
  EXPECT_FALSE(u.find_cached_target(*info));
  fs::path p = u.download_target(*info);
  EXPECT_EQ(test::read_file(p), "kernel bytes");
  EXPECT_EQ(target_dir_files(), (std::vector<std::string>{"dir%2Fkernels.tar.zst"}));
  EXPECT_EQ(u.find_cached_target(*info), p);
  EXPECT_FALSE(u.get_targetinfo("missing"));
}

TEST_F(TufClient, WrongTargetBytesAreRefusedAndNothingIsWritten) {
  repo.add_target("k.bin", "right bytes!");
  repo.publish_release();
  repo.target_files["k.bin"] = "wrong bytes!";  // same length, other hash
  Updater u(options(), fetcher, kNow);
  auto info = u.get_targetinfo("k.bin");
  ASSERT_TRUE(info);
  EXPECT_EQ(attack_of([&] { u.download_target(*info); }), Attack::TargetMismatch);
  repo.target_files["k.bin"] = "right bytes! and more";
  EXPECT_EQ(attack_of([&] { u.download_target(*info); }), Attack::TooLarge);
  EXPECT_TRUE(target_dir_files().empty());
}

TEST_F(TufClient, DelegatedRoleReachedThroughASecondDelegatorIsVerifiedAgainstIt) {
  // targets delegates "parent-a" (team-a/*) and "parent-b" (team-b/*); both delegate
  // "release" with a key of their own. release is signed only with parent-a's key.
  Signer pa = Signer::generate("ed25519"), pb = Signer::generate("ed25519");
  Signer ra = Signer::generate("ed25519"), rb = Signer::generate("ed25519");
  auto delegation = [](const std::string& name, const Signer& s, const std::string& path) {
    return json{{"name", name},
                {"keyids", {s.keyid()}},
                {"threshold", 1},
                {"terminating", false},
                {"paths", {path}}};
  };
  repo.targets["delegations"] = {
      {"keys",
       {{pa.keyid(), key_to_json(pa.public_key())}, {pb.keyid(), key_to_json(pb.public_key())}}},
      {"roles", {delegation("parent-a", pa, "team-a/*"), delegation("parent-b", pb, "team-b/*")}}};
  auto parent = [&](const std::string& path, const Signer& release_key) {
    return json{{"_type", "targets"},
                {"spec_version", "1.0.34"},
                {"version", 1},
                {"expires", kFuture},
                {"targets", json::object()},
                {"delegations",
                 {{"keys", {{release_key.keyid(), key_to_json(release_key.public_key())}}},
                  {"roles", {delegation("release", release_key, path)}}}}};
  };
  json release = {{"_type", "targets"},
                  {"spec_version", "1.0.34"},
                  {"version", 1},
                  {"expires", kFuture},
                  {"targets", json::object()}};
  for (const char* p : {"team-a/x", "team-b/x"})
    release["targets"][p] = {{"length", 1}, {"hashes", {{"sha256", *hex_digest("sha256", "x")}}}};
  repo.files["parent-a.json"] = sign_metadata(parent("team-a/*", ra), {&pa});
  repo.files["parent-b.json"] = sign_metadata(parent("team-b/*", rb), {&pb});
  repo.files["release.json"] = sign_metadata(release, {&ra});
  for (const char* r : {"parent-a.json", "parent-b.json", "release.json"})
    repo.snapshot["meta"][r] = {{"version", 1}};
  repo.publish_release();

  {
    Updater u(options(), fetcher, kNow);
    EXPECT_TRUE(u.get_targetinfo("team-a/x"));
    EXPECT_EQ(attack_of([&] { u.get_targetinfo("team-b/x"); }), Attack::UntrustedKey);
  }  // the Updater holds the metadata dir's lock until here
  // A fresh process finds release.json stored; through parent-b it is still refused, and
  // the target through parent-a was never written anywhere by these lookups.
  Updater again(options(), fetcher, kNow);
  EXPECT_EQ(attack_of([&] { again.get_targetinfo("team-b/x"); }), Attack::UntrustedKey);
  EXPECT_TRUE(target_dir_files().empty());
}

// docs/tuf.md "Stored metadata": a stored timestamp, snapshot or targets that is not TUF
// metadata, or cannot be read at all (a FIFO in its place), is as if absent: the repository's
// copy is fetched again, verified, stored, and the refresh succeeds.
TEST_F(TufClient, CorruptOrUnreadableStoredRoleIsFetchedAgain) {
  refresh();
  const std::map<std::string, std::vector<std::string>> requests{
      {"timestamp", {"meta/2.root.json", "meta/timestamp.json"}},
      {"snapshot", {"meta/2.root.json", "meta/timestamp.json", "meta/snapshot.json"}},
      {"targets", {"meta/2.root.json", "meta/timestamp.json", "meta/targets.json"}}};
  for (const auto& [role, expected] : requests) {
    for (const char* damage : {"corrupt", "unreadable"}) {
      SCOPED_TRACE(role + " " + damage);
      fs::path stored = dir_ / "metadata" / (role + ".json");
      fs::remove(stored);
      if (std::string(damage) == "corrupt")
        test::write_file(stored, "{\"signed\": ");
      else
        ASSERT_EQ(::mkfifo(stored.c_str(), 0600), 0);
      fetcher.requests.clear();
      EXPECT_NO_THROW(refresh());
      EXPECT_EQ(fetcher.requests, expected);
      EXPECT_TRUE(fs::is_regular_file(stored));
      EXPECT_EQ(test::read_file(stored), repo.files.at(role + ".json"));
    }
  }
}

// The trusted root is the anchor, never fetched: a corrupt or unreadable one is an error that
// names it, before any request, and it is left as it is.
TEST_F(TufClient, CorruptOrUnreadableStoredRootIsAClearError) {
  fs::path root = dir_ / "metadata" / "root.json";
  test::write_file(root, "{\"signed\": ");
  auto open_updater = [&] { Updater u(options(), fetcher, kNow); };
  EXPECT_EQ(attack_of(open_updater), Attack::Malformed);
  EXPECT_EQ(message_of(open_updater), "tuf: malformed metadata: trusted root.json: not valid JSON");
  EXPECT_EQ(test::read_file(root), "{\"signed\": ");
  fs::remove(root);
  ASSERT_EQ(::mkfifo(root.c_str(), 0600), 0);
  try {
    open_updater();
    ADD_FAILURE() << "an unreadable root was accepted";
  } catch (const kiln::Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_NE(std::string(e.what()).find(root.string() + ": not a regular file"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(fetcher.requests.empty());
}

TEST_F(TufClient, StoredTargetWithOtherBytesIsAMissAndIsReplaced) {
  repo.add_target("k.bin", "right bytes!");
  repo.publish_release();
  Updater u(options(), fetcher, kNow);
  auto info = u.get_targetinfo("k.bin");
  ASSERT_TRUE(info);
  test::write_file(u.target_path_for(*info), "wrong bytes!");
  EXPECT_FALSE(u.find_cached_target(*info));
  EXPECT_EQ(test::read_file(u.download_target(*info)), "right bytes!");
  EXPECT_EQ(u.find_cached_target(*info), u.target_path_for(*info));
}

TEST_F(TufClient, CurlFetcherBoundsAFileUrlAndReportsMissingFiles) {
  test::write_file(dir_ / "repo" / "big.json", std::string(100, 'x'));
  auto f = make_curl_fetcher();
  std::string base = "file://" + (dir_ / "repo").string() + "/";
  EXPECT_EQ(f->get(base + "big.json", 100), std::string(100, 'x'));
  EXPECT_EQ(attack_of([&] { f->get(base + "big.json", 99); }), Attack::TooLarge);
  EXPECT_FALSE(f->get(base + "absent.json", 100));
}

TEST_F(TufClient, CliRefreshesFromAFileUrlAndExitsOneOnRollback) {
  fs::path served = dir_ / "served";
  auto serve = [&] {
    for (auto& [name, bytes] : repo.files) test::write_file(served / name, bytes);
  };
  repo.publish_release();
  serve();
  fs::path md = dir_ / "cli-md";
  fs::create_directories(md);
  test::write_file(dir_ / "initial_root.json", repo.initial_root());
  std::string cli = test::kiln_cli() + " tuf-client --metadata-dir " + md.string();
  auto init = test::run(cli + " init " + (dir_ / "initial_root.json").string());
  ASSERT_EQ(init.exit_code, 0) << init.out;
  std::string refresh = cli + " --metadata-url file://" + served.string() + " refresh";
  auto ok = test::run(refresh);
  ASSERT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_EQ(json::parse(test::read_file(md / "timestamp.json"))["signed"]["version"], 2);
  repo.timestamp["version"] = 1;
  repo.publish("timestamp");
  serve();
  auto bad = test::run(refresh);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("tuf: rollback: timestamp.json: field \"version\" is 1, trusted version "
                         "is 2"),
            std::string::npos)
      << bad.out;
}

}  // namespace
}  // namespace kiln::tuf
