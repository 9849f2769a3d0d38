#include "io/atomic_file.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "kiln/error.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::read_file;
using test::TempDir;
using test::write_file;

std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

TEST(AtomicFile, UncommittedWriteLeavesNoFileBehind) {
  TempDir dir;
  {
    io::AtomicFile f(dir / "out.bin");
    f.write("partial");
    EXPECT_TRUE(fs::exists(f.tmp_path()));
  }
  EXPECT_TRUE(names_in(dir.path()).empty());
}

TEST(AtomicFile, ReadersSeeOldContentsUntilCommitThenTheNewOnes) {
  TempDir dir;
  auto target = dir / "data.json";
  write_file(target, "old");
  io::AtomicFile f(target);
  EXPECT_EQ(f.tmp_path().parent_path(), target.parent_path()) << "same directory: atomic rename";
  EXPECT_EQ(f.tmp_path().filename().string().rfind("data.json.tmp.", 0), 0u);
  f.write("new ");
  f.write("contents");
  EXPECT_EQ(read_file(target), "old");
  f.commit();
  EXPECT_EQ(read_file(target), "new contents");
  EXPECT_EQ(names_in(dir.path()), std::set<std::string>{"data.json"});
}

TEST(AtomicFile, ConcurrentWritersUseDistinctTemporaryFilesAndLastCommitWins) {
  TempDir dir;
  auto target = dir / "x";
  io::AtomicFile a(target), b(target);
  EXPECT_NE(a.tmp_path(), b.tmp_path());
  a.write("from a");
  b.write("from b");
  a.commit();
  EXPECT_EQ(read_file(target), "from a");
  b.commit();
  EXPECT_EQ(read_file(target), "from b");
  EXPECT_EQ(names_in(dir.path()), std::set<std::string>{"x"});
}

TEST(AtomicFile, MissingDirectoryIsIoErrorNamingThePath) {
  TempDir dir;
  try {
    io::AtomicFile f(dir / "missing" / "x");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_NE(std::string(e.what()).find((dir / "missing").string()), std::string::npos)
        << e.what();
  }
}

TEST(AtomicFile, FailedRenameLeavesTargetUntouchedAndNoTemporaryFile) {
  TempDir dir;
  auto target = dir / "taken";
  write_file(target / "inside", "keep");  // a non-empty directory where the file should go
  io::AtomicFile f(target);
  f.write("data");
  try {
    f.commit();
    FAIL() << "rename over a directory succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_NE(std::string(e.what()).find(target.string()), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_file(target / "inside"), "keep");
  EXPECT_EQ(names_in(dir.path()), std::set<std::string>{"taken"});
}

TEST(AtomicFile, WriteFileAtomicallyWritesExactBytes) {
  TempDir dir;
  std::string bytes("a\0b\x7f", 4);
  io::write_file_atomically(dir / "f", bytes);
  EXPECT_EQ(read_file(dir / "f"), bytes);
}

}  // namespace
// What a writer killed before commit() leaves ("<file>.tmp.<16 hex>") is removed by the next
// holder of the lock (crash points, tests/crash/): only AtomicFile's own names, of the file asked.
TEST(AtomicFile, OrphanedTemporaryFilesAreRemovedAndNothingElse) {
  TempDir dir;
  write_file(dir / "a.json", "a");
  write_file(dir / "a.json.tmp.0123456789abcdef", "half");
  write_file(dir / "b.json.tmp.fedcba9876543210", "");
  write_file(dir / "a.json.tmp.notsixteenhex", "kept");
  write_file(dir / "a.json.tmp.0123456789ABCDEF", "kept");
  fs::create_directories(dir / "c.tmp.0123456789abcdef");

  auto removed = io::remove_orphaned_temps(dir.path(), "a.json");
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0], dir / "a.json.tmp.0123456789abcdef");
  EXPECT_EQ(
      names_in(dir.path()),
      (std::set<std::string>{"a.json", "b.json.tmp.fedcba9876543210", "a.json.tmp.notsixteenhex",
                             "a.json.tmp.0123456789ABCDEF", "c.tmp.0123456789abcdef"}));

  EXPECT_EQ(io::remove_orphaned_temps(dir.path()).size(), 1u);  // b's: every file's, not the dir
  EXPECT_EQ(names_in(dir.path()),
            (std::set<std::string>{"a.json", "a.json.tmp.notsixteenhex",
                                   "a.json.tmp.0123456789ABCDEF", "c.tmp.0123456789abcdef"}));
}

}  // namespace kiln
