// core/util: the domain-free helpers (join, the one error for a bad field of a file), and the
// errors of the readers built on them carrying the file and the field.
#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "builder/shard.hpp"
#include "format/manifest.hpp"
#include "kiln/error.hpp"
#include "util/field_error.hpp"
#include "util/join.hpp"

namespace {

using kiln::Error;
using kiln::ErrorKind;
namespace util = kiln::util;

TEST(UtilJoin, PutsTheSeparatorBetweenElementsOnly) {
  EXPECT_EQ(util::join(std::vector<std::string>{}, ", "), "");
  EXPECT_EQ(util::join(std::vector<std::string>{"a"}, ", "), "a");
  EXPECT_EQ(util::join(std::vector<std::string>{"a", "b", "c"}, ", "), "a, b, c");
  EXPECT_EQ(util::join(std::vector<std::string>{"x", "y"}, "; "), "x; y");
  EXPECT_EQ(util::join(std::vector<std::string>{"x", "y"}, ""), "xy");
}

TEST(UtilJoin, TakesAnyRangeOfText) {
  EXPECT_EQ(util::join(std::set<std::string>{"b", "a"}, ", "), "a, b");
  EXPECT_EQ(util::join(std::array<std::string_view, 2>{"format", "package"}, ", "),
            "format, package");
  EXPECT_EQ(util::join(std::vector<const char*>{"cuInit", "cuLaunchKernel"}, ", "),
            "cuInit, cuLaunchKernel");
}

TEST(UtilJoin, ProjectsEachElementFirst) {
  struct Archive {
    std::string target;
  };
  std::vector<Archive> archives{{"sm_80"}, {"sm_90a"}};
  EXPECT_EQ(util::join(archives, ", ", [](const Archive& a) { return a.target; }), "sm_80, sm_90a");
  std::vector<std::filesystem::path> dirs{"/a", "/b/c"};
  EXPECT_EQ(util::join(dirs, " ", [](const std::filesystem::path& p) { return p.string(); }),
            "/a /b/c");
  EXPECT_EQ(util::join(std::vector<int>{}, ", ", [](int i) { return std::to_string(i); }), "");
}

TEST(UtilFieldError, NamesThePathAndFieldInTheMessageAndItsFields) {
  Error e = util::field_error("dist/m.json", "artifacts[0].size", "expected an integer");
  EXPECT_EQ(std::string(e.what()), "dist/m.json: field 'artifacts[0].size': expected an integer");
  EXPECT_EQ(e.kind(), ErrorKind::Format);
  ASSERT_NE(e.field("path"), nullptr);
  EXPECT_EQ(*e.field("path"), "dist/m.json");
  ASSERT_NE(e.field("field"), nullptr);
  EXPECT_EQ(*e.field("field"), "artifacts[0].size");

  Error whole = util::field_error("x.json", "", "not JSON", ErrorKind::Limit);
  EXPECT_EQ(std::string(whole.what()), "x.json: not JSON");
  EXPECT_EQ(whole.kind(), ErrorKind::Limit);
  ASSERT_NE(whole.field("path"), nullptr);
  EXPECT_EQ(*whole.field("path"), "x.json");
}

TEST(UtilFieldError, FailThrowsIt) {
  try {
    util::fail("p.json", "format", "expected an integer", ErrorKind::Stale);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "p.json: field 'format': expected an integer");
    EXPECT_EQ(e.kind(), ErrorKind::Stale);
    EXPECT_EQ(*e.field("field"), "format");
  }
}

// The readers that share it: a manifest's and a shard file's errors carry the file and field.
TEST(UtilFieldError, ManifestAndShardErrorsCarryPathAndField) {
  try {
    kiln::format::parse_manifest(R"({"format": "kiln-manifest", "format_version": "one"})", "m.json");
    FAIL() << "no throw";
  } catch (const Error& e) {
    ASSERT_NE(e.field("path"), nullptr) << e.what();
    EXPECT_EQ(*e.field("path"), "m.json");
    ASSERT_NE(e.field("field"), nullptr) << e.what();
    EXPECT_EQ(*e.field("field"), "format_version");
  }
  try {
    kiln::builder::parse_shard_manifest(R"({"kind": "kiln-shard"})", "s.json");
    FAIL() << "no throw";
  } catch (const Error& e) {
    ASSERT_NE(e.field("path"), nullptr) << e.what();
    EXPECT_EQ(*e.field("path"), "s.json");
    ASSERT_NE(e.field("field"), nullptr) << e.what();
  }
}

}  // namespace
