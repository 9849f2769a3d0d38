#include "io/artifact_check.hpp"

#include <gtest/gtest.h>

#include "io/sha256.hpp"

namespace kiln {
namespace {

TEST(ArtifactCheck, BytesMatchingTheirPinPass) {
  EXPECT_FALSE(io::pin_mismatch("abc", {3, io::sha256_hex("abc")}));
}

TEST(ArtifactCheck, ASizeThatDiffersIsReportedBeforeAnyDigest) {
  auto m = io::pin_mismatch("abcd", {3, io::sha256_hex("abc")});
  ASSERT_TRUE(m);
  EXPECT_EQ(m->field, "size");
  EXPECT_EQ(m->actual, "4");
  EXPECT_EQ(m->expected, "3");
  EXPECT_EQ(m->message("a/x.fatbin", "manifest"), "a/x.fatbin: size is 4 bytes, manifest says 3");
}

TEST(ArtifactCheck, ADigestThatDiffersNamesBothDigestsAndWhatPinnedIt) {
  auto m = io::pin_mismatch("abd", {3, io::sha256_hex("abc")});
  ASSERT_TRUE(m);
  EXPECT_EQ(m->field, "sha256");
  EXPECT_EQ(m->message("r.tar.zst", "index.json"),
            "r.tar.zst: sha256 is " + io::sha256_hex("abd") + ", index.json says " + io::sha256_hex("abc"));
  EXPECT_EQ(m->message("", "manifest"),
            "sha256 is " + io::sha256_hex("abd") + ", manifest says " + io::sha256_hex("abc"));
}

TEST(ArtifactCheck, SizeAndDigestChecksAloneCompareWhatTheyAreGiven) {
  EXPECT_FALSE(io::size_mismatch(7, 7));
  EXPECT_EQ(io::size_mismatch(8, 7)->message("f", "p"), "f: size is 8 bytes, p says 7");
  EXPECT_FALSE(io::digest_mismatch("aa", "aa"));
  EXPECT_EQ(io::digest_mismatch("ab", "aa")->message("f", "p"), "f: sha256 is ab, p says aa");
}

// A file measured elsewhere (its size and digest) against its pin: size first, then digest.
TEST(ArtifactCheck, AMeasuredFileIsJudgedLikeItsBytes) {
  const io::ArtifactPin pin{3, io::sha256_hex("abc")};
  EXPECT_FALSE(io::pin_mismatch(3, io::sha256_hex("abc"), pin));
  EXPECT_EQ(io::pin_mismatch(4, io::sha256_hex("abd"), pin)->message("f", "i"), "f: size is 4 bytes, i says 3");
  EXPECT_EQ(io::pin_mismatch(3, io::sha256_hex("abd"), pin)->message("f", "i"),
            io::pin_mismatch("abd", pin)->message("f", "i"));
}

TEST(Coverage, NamesWhatIsListedButMissingAndWhatIsThereUnlisted) {
  io::Coverage c = io::coverage({"manifest.json", "b", "a", "c"}, {"a", "x", "manifest.json", "y", "x"});
  EXPECT_EQ(c.missing, (std::vector<std::string>{"b", "c"}));   // the list's order
  EXPECT_EQ(c.unlisted, (std::vector<std::string>{"x", "y"}));  // present's order, once
  EXPECT_FALSE(c.complete());
  EXPECT_TRUE(io::coverage({"a", "b"}, {"b", "a"}).complete());
}

TEST(Coverage, MessagesSayWhereAndWhatListsIt) {
  EXPECT_EQ(io::missing_message("r.tar.zst:u.fatbin", "u", "the manifest"),
            "r.tar.zst:u.fatbin: artifact u is listed in the manifest but missing");
  EXPECT_EQ(io::unlisted_message("store/a/extra", "the manifest"),
            "store/a/extra: not listed in the manifest");
}

}  // namespace
}  // namespace kiln
