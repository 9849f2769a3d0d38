// kiln::Error's context fields: kept in order, copied with the error, added without touching
// the message, and set by the checks whose callers decide from them.
#include <gtest/gtest.h>

#include <exception>

#include "format/manifest.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "store/store.hpp"
#include "test_util.hpp"

namespace {

using kiln::Error;
using kiln::ErrorField;
using kiln::ErrorKind;

TEST(ErrorFields, KeepTheirOrderSurviveCopiesAndRethrowAndWithLeavesTheMessage) {
  Error plain(ErrorKind::Io, "no fields");
  EXPECT_TRUE(plain.fields().empty());
  EXPECT_EQ(plain.field("path"), nullptr);

  Error e(ErrorKind::Integrity, "bad bytes", {{"path", "/s/a.fatbin"}, {"field", "sha256"}});
  Error more = e.with("mirror", "https://m.example");
  EXPECT_EQ(std::string(more.what()), "bad bytes");
  EXPECT_EQ(more.kind(), ErrorKind::Integrity);
  EXPECT_EQ(more.fields(),
            (std::vector<ErrorField>{
                {"path", "/s/a.fatbin"}, {"field", "sha256"}, {"mirror", "https://m.example"}}));
  EXPECT_EQ(e.fields().size(), 2u) << "with() must not change the original";

  std::exception_ptr p;
  try {
    throw more;
  } catch (...) {
    p = std::current_exception();
  }
  try {
    std::rethrow_exception(p);
  } catch (const Error& caught) {
    ASSERT_NE(caught.field("mirror"), nullptr);
    EXPECT_EQ(*caught.field("mirror"), "https://m.example");
    EXPECT_EQ(*caught.field("field"), "sha256");
  }
}

TEST(ErrorFields, AnArtifactThatDiffersFromItsManifestNamesFieldExpectedAndActual) {
  kiln::test::TempDir dir;
  kiln::test::write_file(dir / "k.fatbin", "served bytes");
  kiln::format::ArtifactEntry a;
  a.uri = "axpy_dtype_f32";
  a.file = "k.fatbin";
  a.size = 12;
  a.sha256 = kiln::io::sha256_hex("pinned bytes");
  try {
    kiln::store::read_verified_artifact(dir.path(), a);
    FAIL() << "accepted bytes that differ from the manifest";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Integrity);
    EXPECT_EQ(e.fields(), (std::vector<ErrorField>{{"uri", "axpy_dtype_f32"},
                                                   {"path", (dir / "k.fatbin").string()},
                                                   {"field", "sha256"},
                                                   {"expected", a.sha256},
                                                   {"actual", kiln::io::sha256_hex("served bytes")}}));
  }
  a.size = 13;
  try {
    kiln::store::read_verified_artifact(dir.path(), a);
    FAIL() << "accepted a file of the wrong size";
  } catch (const Error& e) {
    ASSERT_NE(e.field("field"), nullptr);
    EXPECT_EQ(*e.field("field"), "size");
    EXPECT_EQ(*e.field("expected"), "13");
    EXPECT_EQ(*e.field("actual"), "12");
  }
}

}  // namespace
