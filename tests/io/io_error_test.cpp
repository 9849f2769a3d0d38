#include "io/io_error.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <system_error>

#include "kiln/error.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// What `kiln` prints for a std::filesystem call that threw (a full disk, a read-only mount): an
// io error (exit 9) naming the call, the path and the system's words, not an internal one.
TEST(IoError, AFilesystemCallThatThrewIsAnIoErrorNamingThePathAndTheSystemsWords) {
  test::TempDir dir;
  fs::path file = dir / "file";
  test::write_file(file, "x");
  try {
    fs::create_directories(file / "sub");  // a regular file in the way: ENOTDIR or EEXIST
    FAIL() << "create_directories under a file succeeded";
  } catch (const fs::filesystem_error& e) {
    Error err = io::io_error_of(e);
    EXPECT_EQ(err.kind(), ErrorKind::Io);
    EXPECT_EQ(exit_code(err.kind()), 9);
    std::string what = err.what();
    EXPECT_NE(what.find(file.string()), std::string::npos) << what;
    EXPECT_NE(what.find(e.code().message()), std::string::npos) << what;
    EXPECT_EQ(what.rfind("filesystem error: ", 0), std::string::npos) << what;
    ASSERT_NE(err.field("path"), nullptr);
    EXPECT_EQ(err.field("path")->rfind(file.string(), 0), 0u) << *err.field("path");
  }
  fs::filesystem_error full("cannot copy file", dir / "a", dir / "b",
                            std::error_code(ENOSPC, std::generic_category()));
  std::string what = io::io_error_of(full).what();
  EXPECT_NE(what.find("No space left on device"), std::string::npos) << what;
  EXPECT_NE(what.find((dir / "b").string()), std::string::npos) << what;
}

}  // namespace
}  // namespace kiln
