#include "plan/resolver.hpp"
#include "plan/near_matches.hpp"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string_view>

#include "io/sha256.hpp"

namespace {

using kiln::ErrorKind;
using kiln::store::StoreArchive;
using kiln::plan::StoreScan;

const std::string kUri = "axpy_dtype_f32";
const std::string kHash(64, 'a');

kiln::plan::BuildIdentity identity() { return {"kiln-kernels", "0.1.0", kiln::format::kManifestFormat, kHash}; }

StoreArchive archive(const std::string& store, const std::string& target,
                     const std::string& version = "0.1.0", const std::string& hash = kHash) {
  kiln::format::Manifest m;
  m.package = "kiln-kernels";
  m.package_version = version;
  m.cuda_version = "13.0";
  m.target = target;
  kiln::format::ArtifactEntry a;
  a.uri = kUri;
  a.family = "axpy";
  a.entries = {{"kiln::axpy_kernel<float>", "_Z11axpy_kernelIfEvv"}};
  a.source_hash = hash;
  a.file = kUri + ".fatbin";
  a.size = 3;
  a.sha256 = kiln::io::sha256_hex("abc");
  m.artifacts.push_back(a);
  StoreArchive s;
  s.dir = store + "/kiln-kernels-" + version + "-cuda13.0-" + target;
  s.manifest = std::make_shared<const kiln::format::Manifest>(m);
  return s;
}

StoreScan store(const std::string& dir, const std::vector<std::string>& targets) {
  StoreScan s;
  s.dir = dir;
  s.readable = true;
  for (const auto& t : targets) s.archives.push_back(archive(dir, t));
  return s;
}

std::vector<std::string> usable_targets(const kiln::plan::StorePlan& p) {
  std::vector<std::string> out;
  for (const auto& c : p.usable) out.push_back(c.candidate.target);
  return out;
}

std::string reason_for(const kiln::plan::StorePlan& p, const std::string& target) {
  for (const auto& r : p.rejected)
    if (r.candidate.target == target) return r.candidate.reason;
  return "<not rejected>";
}

struct TargetCase {
  int cc;
  std::vector<std::string> available;
  std::vector<std::string> expected_order;
  std::vector<std::string> expected_rejected;
};

TEST(Resolver, TargetChoiceExactSassThenLowerMinorThenPtx) {
  const std::vector<TargetCase> cases = {
      {90,
       {"sm_80", "sm_86", "sm_90", "sm_90a", "compute_80", "sm_100f"},
       {"sm_90a", "sm_90", "compute_80"},
       {"sm_80", "sm_86", "sm_100f"}},
      {89,
       {"sm_80", "sm_86", "sm_90", "compute_80", "compute_90"},
       {"sm_86", "sm_80", "compute_80"},
       {"sm_90", "compute_90"}},
      {103,
       {"sm_100f", "sm_100a", "sm_103", "compute_90", "sm_100"},
       {"sm_103", "sm_100f", "sm_100", "compute_90"},
       {"sm_100a"}},
      {120, {"sm_100f", "sm_90a", "compute_120"}, {"compute_120"}, {"sm_100f", "sm_90a"}},
      {86,
       {"sm_86", "sm_80", "compute_86", "compute_80"},
       {"sm_86", "sm_80", "compute_86", "compute_80"},
       {}},
  };
  for (const auto& c : cases) {
    auto plan = kiln::plan::plan_stores(kUri, c.cc, identity(), {store("/s", c.available)}, false);
    EXPECT_EQ(usable_targets(plan), c.expected_order) << "cc " << c.cc;
    for (const auto& r : c.expected_rejected)
      EXPECT_NE(reason_for(plan, r).find("the device is CC"), std::string::npos)
          << "cc " << c.cc << " " << r << ": " << reason_for(plan, r);
  }
}

TEST(Resolver, RejectionsSayWhyATargetDoesNotRun) {
  auto plan = kiln::plan::plan_stores(
      kUri, 90, identity(), {store("/s", {"sm_80a", "sm_100f", "compute_100", "sm_89"})}, false);
  EXPECT_EQ(reason_for(plan, "sm_80a"),
            "sm_80a runs only on CC 8.0 (arch-specific); the device is CC 9.0");
  EXPECT_EQ(reason_for(plan, "sm_100f"),
            "sm_100f runs only on CC 10.x with x >= 0 (family); the device is CC 9.0");
  EXPECT_EQ(reason_for(plan, "compute_100"),
            "PTX compute_100 needs CC >= 10.0; the device is CC 9.0");
  EXPECT_EQ(reason_for(plan, "sm_89"), "SASS sm_89 runs only on CC 8.x; the device is CC 9.0");
}

TEST(Resolver, StoreOrderComesBeforeTargetPreference) {
  auto plan = kiln::plan::plan_stores(
      kUri, 90, identity(), {store("/first", {"compute_80"}), store("/second", {"sm_90"})}, false);
  ASSERT_EQ(plan.usable.size(), 2u);
  EXPECT_EQ(plan.usable[0].store_dir, "/first");
  EXPECT_EQ(plan.usable[0].candidate.target, "compute_80");
  EXPECT_EQ(plan.usable[0].candidate.path,
            "/first/kiln-kernels-0.1.0-cuda13.0-compute_80/axpy_dtype_f32.fatbin");
  EXPECT_EQ(plan.usable[1].store_dir, "/second");
}

TEST(Resolver, StalePackageVersionIsRejectedNamingFieldAndBothValues) {
  StoreScan s = store("/s", {});
  s.archives.push_back(archive("/s", "sm_90", "0.0.9"));
  auto plan = kiln::plan::plan_stores(kUri, 90, identity(), {s}, false);
  EXPECT_TRUE(plan.usable.empty());
  ASSERT_EQ(plan.rejected.size(), 1u);
  EXPECT_EQ(plan.rejected[0].kind, ErrorKind::Stale);
  EXPECT_NE(plan.rejected[0].candidate.reason.find("package_version differs: archive has 0.0.9, "
                                                   "this loader's package kiln-kernels is 0.1.0"),
            std::string::npos)
      << plan.rejected[0].candidate.reason;
}

TEST(Resolver, StaleSourceHashIsRejectedNamingFieldAndBothValues) {
  StoreScan s = store("/s", {});
  s.archives.push_back(archive("/s", "sm_90", "0.1.0", std::string(64, 'b')));
  auto plan = kiln::plan::plan_stores(kUri, 90, identity(), {s}, false);
  ASSERT_EQ(plan.rejected.size(), 1u);
  EXPECT_EQ(plan.rejected[0].kind, ErrorKind::Stale);
  const std::string& r = plan.rejected[0].candidate.reason;
  EXPECT_NE(r.find("source_hash differs"), std::string::npos) << r;
  EXPECT_NE(r.find(std::string(64, 'b')), std::string::npos) << r;
  EXPECT_NE(r.find(kHash), std::string::npos) << r;
  EXPECT_NE(r.find("KILN_ALLOW_STALE"), std::string::npos) << r;
}

TEST(Resolver, AllowStaleKeepsTheCandidateButMarksIt) {
  StoreScan s = store("/s", {});
  s.archives.push_back(archive("/s", "sm_90", "0.0.9"));
  auto plan = kiln::plan::plan_stores(kUri, 90, identity(), {s}, true);
  ASSERT_EQ(plan.usable.size(), 1u);
  EXPECT_NE(plan.usable[0].stale.find("package_version"), std::string::npos);
}

TEST(Resolver, MissingStoresEmptyStoresAndArchivesWithoutTheUriAreRejectedWithReasons) {
  StoreScan missing;
  missing.dir = "/nope";
  missing.problem = "does not exist";
  StoreScan empty;
  empty.dir = "/empty";
  empty.readable = true;
  StoreScan other = store("/other", {"sm_90"});
  {
    kiln::format::Manifest m = *other.archives[0].manifest;
    m.artifacts.clear();
    m.skipped = {{"axpy", "supports only sm_100a"}};
    other.archives[0].manifest = std::make_shared<const kiln::format::Manifest>(std::move(m));
  }
  StoreScan broken;
  broken.dir = "/broken";
  broken.readable = true;
  broken.archives.push_back({"/broken/kiln-kernels-x", nullptr, ErrorKind::Format, "bad json"});
  auto plan = kiln::plan::plan_stores(kUri, 90, identity(), {missing, empty, other, broken}, false);
  ASSERT_EQ(plan.rejected.size(), 4u);
  EXPECT_EQ(plan.rejected[0].candidate.path, "/nope");
  EXPECT_EQ(plan.rejected[0].candidate.reason, "does not exist");
  EXPECT_NE(plan.rejected[1].candidate.reason.find("holds no archive"), std::string::npos);
  EXPECT_EQ(plan.rejected[2].candidate.reason,
            "archive does not contain axpy_dtype_f32 (family axpy skipped: supports only sm_100a)");
  EXPECT_EQ(plan.rejected[3].candidate.path, "/broken/kiln-kernels-x/manifest.json");
  EXPECT_EQ(plan.rejected[3].candidate.reason, "bad json");
}

// A disk held in memory behind the thin interface (store/store_fs.hpp): listings and files by
// path, no identities (so nothing is remembered between scans), every whole-file read noted.
class VirtualStoreFs : public kiln::store::StoreFs {
 public:
  std::map<std::string, kiln::store::StoreListing> listings;
  std::map<std::string, std::string> files;
  mutable std::vector<std::string> reads;

  kiln::store::StoreListing list(const std::string& dir, std::string_view) const override {
    auto it = listings.find(dir);
    if (it != listings.end()) return it->second;
    kiln::store::StoreListing none;
    none.problem = "does not exist";
    return none;
  }
  std::optional<kiln::io::FileIdentity> identity(const std::string&) const override {
    return std::nullopt;
  }
  std::string read(const std::string& path, std::uint64_t) const override {
    reads.push_back(path);
    auto it = files.find(path);
    if (it == files.end()) throw kiln::Error(ErrorKind::NotFound, "file not found: " + path);
    return it->second;
  }
  std::optional<std::vector<std::string>> pread(
      const std::string&, const kiln::io::FileIdentity&,
      const std::vector<std::pair<std::size_t, std::size_t>>&) const override {
    return std::nullopt;
  }

  // An archive directory of `target` in `store`, its manifest archive()'s.
  void add_archive(const std::string& store, const std::string& target) {
    StoreArchive a = archive(store, target);
    auto& l = listings[store];
    l.status = kiln::store::ListingStatus::Listed;
    l.archive_names.push_back(a.dir.substr(store.size() + 1));
    files[a.dir + "/manifest.json"] = kiln::format::manifest_to_json(*a.manifest);
  }
};

TEST(StoreScanner, AGetReadsOnlyTheManifestOfTheBestTargetThatRunsAndAFullScanReadsAll) {
  auto disk = std::make_shared<VirtualStoreFs>();
  for (const char* t : {"sm_80", "sm_90", "sm_100"}) disk->add_archive("/s", t);
  kiln::plan::StoreScanner scanner("kiln-kernels", "0.1.0", "", disk);

  StoreScan fast = scanner.scan_for("/s", "test", kUri, 90);
  ASSERT_TRUE(fast.readable);
  ASSERT_EQ(fast.archives.size(), 1u);
  ASSERT_TRUE(fast.archives[0].manifest) << fast.archives[0].error;
  EXPECT_EQ(fast.archives[0].manifest->target, "sm_90");
  EXPECT_EQ(disk->reads,
            std::vector<std::string>{"/s/kiln-kernels-0.1.0-cuda13.0-sm_90/manifest.json"});

  disk->reads.clear();
  StoreScan full = scanner.scan("/s", "test");
  EXPECT_EQ(full.archives.size(), 3u);
  EXPECT_EQ(disk->reads.size(), 3u);
}

TEST(StoreScanner, AStoreTheDiskCannotListIsUnreadableWithTheDisksReason) {
  auto disk = std::make_shared<VirtualStoreFs>();
  kiln::plan::StoreScanner scanner("kiln-kernels", "0.1.0", "", disk);
  StoreScan s = scanner.scan_for("/nowhere", "test", kUri, 90);
  EXPECT_FALSE(s.readable);
  EXPECT_EQ(s.problem, "does not exist");
  EXPECT_TRUE(disk->reads.empty());
}

TEST(StoreScanner, AManifestThatCannotBeReadIsAnArchiveWithTheReadsError) {
  auto disk = std::make_shared<VirtualStoreFs>();
  disk->add_archive("/s", "sm_90");
  disk->files.clear();
  StoreScan s = kiln::plan::StoreScanner("kiln-kernels", "0.1.0", "", disk).scan("/s", "test");
  ASSERT_EQ(s.archives.size(), 1u);
  EXPECT_FALSE(s.archives[0].manifest);
  EXPECT_EQ(s.archives[0].error_kind, ErrorKind::NotFound);
  EXPECT_EQ(s.archives[0].error,
            "file not found: /s/kiln-kernels-0.1.0-cuda13.0-sm_90/manifest.json");
}

TEST(Resolver, VerifyArtifactNamesBothDigestsOnMismatch) {
  EXPECT_EQ(kiln::plan::verify_artifact("abc", 3, kiln::io::sha256_hex("abc")), "");
  std::string bad = kiln::plan::verify_artifact("abd", 3, kiln::io::sha256_hex("abc"));
  EXPECT_EQ(bad, "integrity: sha256 is " + kiln::io::sha256_hex("abd") + ", manifest says " +
                     kiln::io::sha256_hex("abc"));
  EXPECT_EQ(kiln::plan::verify_artifact("abcd", 3, kiln::io::sha256_hex("abc")),
            "integrity: size is 4 bytes, manifest says 3");
}

TEST(Resolver, NearMatchesSuggestTheClosestUris) {
  std::vector<std::string> all = {"rmsnorm_dtype_bf16_block_256", "rmsnorm_dtype_f16_block_256",
                                  "axpy_dtype_f32", "softmax_dtype_f32_block_128"};
  auto near = kiln::plan::near_matches("rmsnorm_dtype_bf16_block_255", all, 2);
  ASSERT_FALSE(near.empty());
  EXPECT_EQ(near[0], "rmsnorm_dtype_bf16_block_256");
  EXPECT_TRUE(kiln::plan::near_matches("zzzzzzzzzzzzzzzzzzzzzzzzzzzzzz", all).empty());
}

TEST(Resolver, FailureIsStaleWhenOnlyStaleCandidatesExistedElseNotFound) {
  kiln::plan::Rejection stale{{"store", "sm_90", "/s/x.fatbin", "stale: package_version differs"},
                        ErrorKind::Stale};
  kiln::plan::Rejection none{{"mirror", "sm_90", "", "no mirror configured"}, ErrorKind::NotFound};
  kiln::plan::Rejection corrupt{{"store", "sm_90", "/t/x.fatbin", "integrity: ..."},
                          ErrorKind::Integrity};
  EXPECT_EQ(kiln::plan::resolution_failure(kUri, 90, {}, {stale, none}, "advice").kind(),
            ErrorKind::Stale);
  EXPECT_EQ(kiln::plan::resolution_failure(kUri, 90, {}, {corrupt, none}, "advice").kind(),
            ErrorKind::Integrity);
  EXPECT_EQ(kiln::plan::resolution_failure(kUri, 90, {}, {stale, corrupt}, "advice").kind(),
            ErrorKind::NotFound);
  kiln::Error e = kiln::plan::resolution_failure(kUri, 90, {"/a (artifact path)", "/c (cache directory)"},
                                           {stale, none}, "to get it: ADVICE");
  std::string m = e.what();
  EXPECT_NE(m.find("axpy_dtype_f32 on sm_90"), std::string::npos) << m;
  EXPECT_NE(m.find("/a (artifact path)"), std::string::npos) << m;
  EXPECT_NE(m.find("[store sm_90] /s/x.fatbin: stale: package_version differs"), std::string::npos)
      << m;
  EXPECT_NE(m.find("\nto get it: ADVICE"), std::string::npos) << m;
}

TEST(Resolver, FailureCarriesTheFieldsOfTheRejectionThatDecidedItsKind) {
  kiln::plan::Rejection none{
      {"store", "", "/c", "holds no archive"}, ErrorKind::NotFound, {{"path", "/c"}}};
  kiln::plan::Rejection refused{{"mirror", "", "http://m", "tuf: rollback: ..."},
                          ErrorKind::Integrity,
                          {{"attack", "rollback"}, {"target", "sm_90a"}, {"file", "index.json"}}};
  kiln::Error e = kiln::plan::resolution_failure(kUri, 90, {}, {none, refused}, "advice");
  EXPECT_EQ(e.kind(), ErrorKind::Integrity);
  ASSERT_NE(e.field("attack"), nullptr);
  EXPECT_EQ(*e.field("attack"), "rollback");
  EXPECT_EQ(*e.field("file"), "index.json");
  EXPECT_EQ(*e.field("target"), "sm_90");  // the resolution's own fields come first
  EXPECT_EQ(e.field("path"), nullptr);     // a rejection that decided nothing adds nothing
}

}  // namespace
