#include "format/archive.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <functional>

#include "kiln/error.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

std::vector<format::ArchiveMember> sample_members() {
  return {{"manifest.json", "{\"format\": \"kiln-manifest\"}\n"},
          {"a.fatbin", std::string("\x50\xed\x55\xba\0\0binary", 12)},
          {"b.fatbin", std::string(100000, 'x')},
          {"empty.fatbin", ""}};
}

std::vector<std::string> dir_listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Crafts an archive with raw libarchive so tests can hold entries kiln would never write.
struct RawEntry {
  std::string name;
  unsigned type = AE_IFREG;
  std::string data;
  std::string link;  // symlink target or hardlink source
  bool hardlink = false;
};

RawEntry raw(std::string name, unsigned type, std::string data = "", std::string link = "",
             bool hardlink = false) {
  RawEntry r;
  r.name = std::move(name);
  r.type = type;
  r.data = std::move(data);
  r.link = std::move(link);
  r.hardlink = hardlink;
  return r;
}

void write_raw_archive(const fs::path& out, const std::vector<RawEntry>& entries) {
  struct archive* a = archive_write_new();
  ASSERT_EQ(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
  ASSERT_EQ(archive_write_add_filter_zstd(a), ARCHIVE_OK);
  ASSERT_EQ(archive_write_open_filename(a, out.c_str()), ARCHIVE_OK);
  for (const auto& r : entries) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, r.name.c_str());
    archive_entry_set_filetype(e, r.type);
    archive_entry_set_perm(e, 0644);
    if (r.type == AE_IFREG && !r.hardlink) archive_entry_set_size(e, r.data.size());
    if (r.type == AE_IFLNK) archive_entry_set_symlink(e, r.link.c_str());
    if (r.hardlink) archive_entry_set_hardlink(e, r.link.c_str());
    if (r.type == AE_IFCHR) archive_entry_set_rdev(e, makedev(1, 3));
    ASSERT_EQ(archive_write_header(a, e), ARCHIVE_OK) << archive_error_string(a);
    if (!r.data.empty() && !r.hardlink) {
      ASSERT_EQ(archive_write_data(a, r.data.data(), r.data.size()),
                static_cast<la_ssize_t>(r.data.size()));
    }
    archive_entry_free(e);
  }
  ASSERT_EQ(archive_write_close(a), ARCHIVE_OK);
  archive_write_free(a);
}

std::string expect_refused(const fs::path& p, ErrorKind kind = ErrorKind::Format) {
  try {
    format::read_archive(p);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "archive accepted: " << p;
  return "";
}

TEST(Archive, SameMembersTwiceGiveIdenticalBytes) {
  TempDir dir;
  format::write_archive(dir / "one.tar.zst", sample_members(), 1764403200);
  format::write_archive(dir / "two.tar.zst", sample_members(), 1764403200);
  std::string one = test::read_file(dir / "one.tar.zst");
  EXPECT_FALSE(one.empty());
  EXPECT_EQ(one, test::read_file(dir / "two.tar.zst"));
  // zstd frame magic: the archive really is compressed.
  EXPECT_EQ(one.substr(0, 4), std::string("\x28\xb5\x2f\xfd", 4));
  format::write_archive(dir / "three.tar.zst", sample_members(), 1764403201);
  EXPECT_NE(one, test::read_file(dir / "three.tar.zst"));
}

TEST(Archive, ReadsBackEveryMemberInWrittenOrderWithManifestFirst) {
  TempDir dir;
  format::write_archive(dir / "a.tar.zst", sample_members(), 0);
  auto back = format::read_archive(dir / "a.tar.zst");
  auto want = sample_members();
  ASSERT_EQ(back.size(), want.size());
  EXPECT_EQ(back[0].name, "manifest.json");
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(back[i].name, want[i].name);
    EXPECT_EQ(back[i].data, want[i].data);
  }
}

TEST(Archive, EntriesCarryFixedOwnerModeAndMtime) {
  TempDir dir;
  format::write_archive(dir / "a.tar.zst", sample_members(), 1764403200);
  struct archive* a = archive_read_new();
  archive_read_support_filter_zstd(a);
  archive_read_support_format_tar(a);
  ASSERT_EQ(archive_read_open_filename(a, (dir / "a.tar.zst").c_str(), 10240), ARCHIVE_OK);
  archive_entry* e = nullptr;
  int n = 0;
  while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
    ++n;
    EXPECT_EQ(archive_entry_mtime(e), 1764403200);
    EXPECT_FALSE(archive_entry_atime_is_set(e));
    EXPECT_FALSE(archive_entry_ctime_is_set(e));
    EXPECT_EQ(archive_entry_uid(e), 0);
    EXPECT_EQ(archive_entry_gid(e), 0);
    EXPECT_EQ(archive_entry_perm(e), 0644u);
    EXPECT_EQ(archive_entry_filetype(e), static_cast<unsigned>(AE_IFREG));
  }
  archive_read_free(a);
  EXPECT_EQ(n, 4);
}

TEST(Archive, LeavesOnlyTheFinishedArchiveInTheDirectory) {
  TempDir dir;
  format::write_archive(dir / "a.tar.zst", sample_members(), 0);
  format::write_archive(dir / "a.tar.zst", {{"manifest.json", "{}"}}, 0);  // replaces in place
  EXPECT_EQ(dir_listing(dir.path()), std::vector<std::string>{"a.tar.zst"});
  EXPECT_EQ(format::read_archive(dir / "a.tar.zst").size(), 1u);
}

TEST(Archive, RefusesToWriteMemberNamesWithDirectoriesOrDuplicates) {
  TempDir dir;
  for (auto members : std::vector<std::vector<format::ArchiveMember>>{
           {{"sub/x", "1"}}, {{"..", "1"}}, {{"", "1"}}, {{"x", "1"}, {"x", "2"}}}) {
    try {
      format::write_archive(dir / "bad.tar.zst", members, 0);
      ADD_FAILURE() << "accepted " << members[0].name;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Usage);
    }
  }
  EXPECT_TRUE(dir_listing(dir.path()).empty());
}

TEST(Archive, WriteIntoMissingDirectoryFailsAsIoNamingThePath) {
  TempDir dir;
  try {
    format::write_archive(dir / "no" / "such" / "a.tar.zst", sample_members(), 0);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_NE(std::string(e.what()).find("no/such/a.tar.zst"), std::string::npos) << e.what();
  }
}

TEST(Archive, RefusesEvilEntriesNamingArchiveAndEntry) {
  TempDir dir;
  struct Case {
    std::string label;
    std::vector<RawEntry> entries;
    std::string entry, why;
  };
  std::vector<Case> cases = {
      {"symlink", {raw("link", AE_IFLNK, "", "/etc/passwd")}, "link", "symbolic link"},
      {"dotdot", {raw("../x", AE_IFREG, "evil")}, "../x", ".."},
      {"absolute", {raw("/tmp/abs", AE_IFREG, "evil")}, "/tmp/abs", "absolute"},
      {"device", {raw("null", AE_IFCHR)}, "null", "not a regular file"},
      {"hardlink", {raw("a", AE_IFREG, "x"), raw("b", AE_IFREG, "", "a", true)}, "b", "hard link"},
      {"directory", {raw("sub", AE_IFDIR)}, "sub/", "directory"},
      {"nested", {raw("sub/x", AE_IFREG, "x")}, "sub/x", "'/'"},
      {"duplicate", {raw("x", AE_IFREG, "1"), raw("x", AE_IFREG, "2")}, "x", "twice"},
  };
  for (const auto& c : cases) {
    fs::path p = dir / (c.label + ".tar.zst");
    write_raw_archive(p, c.entries);
    std::string msg = expect_refused(p);
    EXPECT_NE(msg.find(p.string()), std::string::npos) << c.label << ": " << msg;
    EXPECT_NE(msg.find("'" + c.entry + "'"), std::string::npos) << c.label << ": " << msg;
    EXPECT_NE(msg.find(c.why), std::string::npos) << c.label << ": " << msg;
  }
}

TEST(Archive, StopsReadingWhenMembersExceedTheSizeLimit) {
  TempDir dir;
  // Highly compressible: small on disk, large once unpacked.
  format::write_archive(dir / "bomb.tar.zst", {{"big", std::string(1 << 20, '\0')}}, 0);
  EXPECT_LT(fs::file_size(dir / "bomb.tar.zst"), 4096u);
  try {
    format::read_archive(dir / "bomb.tar.zst", 64 * 1024);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Limit);
    EXPECT_NE(std::string(e.what()).find("exceeds the limit of 65536"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(format::read_archive(dir / "bomb.tar.zst").at(0).data.size(), 1u << 20);
}

TEST(Archive, MissingArchiveIsNotFound) {
  TempDir dir;
  std::string msg = expect_refused(dir / "nope.tar.zst", ErrorKind::NotFound);
  EXPECT_NE(msg.find("nope.tar.zst"), std::string::npos);
}

TEST(Archive, GarbageAndTruncatedArchivesAreFormatErrors) {
  TempDir dir;
  test::write_file(dir / "garbage.tar.zst", std::string(5000, 'g'));
  expect_refused(dir / "garbage.tar.zst");
  format::write_archive(dir / "full.tar.zst", {{"m", std::string(200000, 'q') + "tail"}}, 0);
  std::string full = test::read_file(dir / "full.tar.zst");
  test::write_file(dir / "cut.tar.zst", full.substr(0, full.size() / 2));
  expect_refused(dir / "cut.tar.zst");
}

}  // namespace
}  // namespace kiln
