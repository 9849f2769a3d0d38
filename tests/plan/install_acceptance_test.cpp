// Which release `kiln install` accepts for each input (plan/install_acceptance.hpp): the rule
// over values, the check of an index against it, and one input installed under it.
#include "plan/install_acceptance.hpp"

#include <gtest/gtest.h>

#include "kiln/error.hpp"
#include "project/package_description.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

const store::RequiredRelease kNone{};
bool same(const store::RequiredRelease& a, const store::RequiredRelease& b) {
  return a.package == b.package && a.version == b.version;
}

TEST(InstallAcceptance, AnyVersionAcceptsEveryRelease) {
  plan::InstallAcceptance rule;
  rule.any_version = true;
  rule.named = store::RequiredRelease{"acme", "1.0.0"};
  rule.described = {{"acme", "2.0.0"}};
  EXPECT_TRUE(same(rule.required_for("acme"), kNone));
  EXPECT_TRUE(same(rule.required_for("other"), kNone));
}

TEST(InstallAcceptance, AReleaseGivenHoldsForEveryInput) {
  plan::InstallAcceptance rule;
  rule.given = true;
  rule.named = store::RequiredRelease{"acme", "1.0.0"};
  EXPECT_TRUE(same(rule.required_for("acme"), {"acme", "1.0.0"}));
  EXPECT_TRUE(same(rule.required_for("other"), {"acme", "1.0.0"}));
  EXPECT_TRUE(same(rule.required_for(""), {"acme", "1.0.0"}));
}

TEST(InstallAcceptance, TheProjectHereHoldsForItsOwnPackageOnly) {
  plan::InstallAcceptance rule;
  rule.named = store::RequiredRelease{"acme", "1.0.0"};
  rule.described = {{"acme", "2.0.0"}, {"other", "3.0.0"}};
  EXPECT_TRUE(same(rule.required_for("acme"), {"acme", "1.0.0"}));
  // Another package: the version described beside the store, else its own.
  EXPECT_TRUE(same(rule.required_for("other"), {"other", "3.0.0"}));
  EXPECT_TRUE(same(rule.required_for("third"), kNone));
  EXPECT_TRUE(same(rule.required_for(""), kNone));
}

TEST(InstallAcceptance, ReadsTheDescriptionsBesideTheStoreNewestFirst) {
  test::TempDir dir;
  for (const char* v : {"1.0.0", "1.2.0", "1.10.0"})
    test::write_file(dir / project::package_description_file_name("acme", v), "{}");
  test::write_file(dir / project::package_description_file_name("other", "0.1.0"), "{}");
  plan::InstallAcceptance rule = plan::install_acceptance(false, false, std::nullopt, dir.path());
  EXPECT_EQ(rule.described,
            (std::map<std::string, std::string>{{"acme", "1.10.0"}, {"other", "0.1.0"}}));
  EXPECT_TRUE(same(rule.required_for("acme"), {"acme", "1.10.0"}));
  // Given or any version: the descriptions do not matter and are not read.
  EXPECT_TRUE(plan::install_acceptance(false, true, store::RequiredRelease{"acme", "1.0.0"}, dir.path())
                  .described.empty());
  plan::InstallAcceptance any =
      plan::install_acceptance(true, false, store::RequiredRelease{"acme", "1.0.0"}, dir.path());
  EXPECT_TRUE(any.described.empty());
  EXPECT_FALSE(any.named);
}

format::Index index_of(const std::string& package, const std::string& version, std::size_t archives) {
  format::Index idx;
  idx.package = package;
  idx.package_version = version;
  idx.archives.resize(archives);
  return idx;
}

ErrorKind refusal(const format::Index& idx, const store::RequiredRelease& wanted, std::string* message) {
  try {
    plan::require_index_accepted(idx, wanted, "/d/acme-1.0.0-index.json");
  } catch (const Error& e) {
    *message = e.what();
    return e.kind();
  }
  ADD_FAILURE() << "accepted";
  return ErrorKind::Internal;
}

TEST(InstallAcceptance, AnIndexOfAnotherReleaseIsStale) {
  std::string m;
  EXPECT_NO_THROW(plan::require_index_accepted(index_of("acme", "1.0.0", 1), kNone, "i"));
  EXPECT_NO_THROW(plan::require_index_accepted(index_of("acme", "1.0.0", 1), {"acme", "1.0.0"}, "i"));
  EXPECT_NO_THROW(plan::require_index_accepted(index_of("acme", "1.0.0", 1), {"acme", ""}, "i"));
  EXPECT_EQ(refusal(index_of("acme", "1.0.0", 1), {"other", "1.0.0"}, &m), ErrorKind::Stale);
  EXPECT_NE(m.find("the index of package acme, not other"), std::string::npos) << m;
  EXPECT_EQ(refusal(index_of("acme", "1.0.0", 1), {"acme", "2.0.0"}, &m), ErrorKind::Stale);
  EXPECT_NE(m.find("package_version is 1.0.0, acme wanted is 2.0.0"), std::string::npos) << m;
  EXPECT_NE(m.find("--version 1.0.0"), std::string::npos) << m;
  EXPECT_EQ(refusal(index_of("acme", "1.0.0", 0), kNone, &m), ErrorKind::NotFound);
  EXPECT_NE(m.find("lists no archives"), std::string::npos) << m;
}

TEST(InstallAcceptance, AnInputOfNoInstallableKindIsAUsageError) {
  test::TempDir dir;
  test::write_file(dir / "notes.txt", "hello");
  try {
    plan::install_input(dir / "notes.txt", dir / "store", plan::InstallAcceptance{});
    FAIL() << "installed";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage);
    EXPECT_NE(std::string(e.what()).find("not an archive (.tar.zst) or an index"),
              std::string::npos);
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "store"));
}

TEST(InstallAcceptance, AnIndexInstallsWholeUnderTheRuleAndAnotherVersionIsRefused) {
  test::TempDir dir;
  test::ReleaseSpec rel;
  rel.package = "acme";
  rel.version = "1.2.0";
  test::SyntheticDist dist = test::write_release_dist(dir / "dist", rel, {"sm_80", "sm_90a"});
  plan::InstallAcceptance wants_other;
  wants_other.described = {{"acme", "1.1.0"}};
  try {
    plan::install_input(dist.index_path, dir / "store", wants_other);
    FAIL() << "installed";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Stale);
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "store"));
  plan::InputInstall r = plan::install_input(dist.index_path, dir / "store", plan::InstallAcceptance{});
  ASSERT_EQ(r.archives.size(), 2u);
  EXPECT_EQ(r.archives[0].first, dist.dir / dist.archive.at("sm_80"));
  EXPECT_EQ(r.archives[0].second.action, store::InstallResult::Action::Installed);
  EXPECT_EQ(r.archives[1].second.manifest.target, "sm_90a");
  // A bare archive of the version described beside the store is refused before unpacking.
  plan::InstallAcceptance described;
  described.described = {{"acme", "1.1.0"}};
  try {
    plan::install_input(dist.dir / dist.archive.at("sm_80"), dir / "store2", described);
    FAIL() << "installed";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Stale);
  }
  EXPECT_EQ(plan::install_input(dist.dir / dist.archive.at("sm_80"), dir / "store2", {})
                .archives.at(0)
                .second.action,
            store::InstallResult::Action::Installed);
}

}  // namespace
}  // namespace kiln
