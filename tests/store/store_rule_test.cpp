// The one store rule (core/store/store_scan.hpp) seen through both of its users: the loader
// (`kiln resolve`, which runs the loader's store tier over StoreScanner) and the CLI's store
// scanner (`kiln verify STORE`). The layouts are those where the two old rules disagreed: the
// loader read only kiln-kernels-* directories and ignored what their names said, the CLI read
// every directory and refused names that did not match their manifest.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "format/manifest.hpp"
#include "io/limits.hpp"
#include "kiln/version.hpp"
#include "store/store_scan.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

const std::string kUri = "rmsnorm_dtype_bf16_block_256";

// This release's store entry for `target` in `store`, one artifact (kUri), in the directory
// that `kiln install` names for it.
fs::path write_archive_dir(const fs::path& store, const std::string& target) {
  test::ReleaseSpec rel;
  rel.with_artifacts({{kUri, "fatbin-bytes"}});
  return test::write_store_entry(store, rel, target);
}

struct Views {
  test::RunResult verify;   // kiln verify STORE
  test::RunResult resolve;  // kiln resolve URI --device sm_80 --explain, STORE the only store
};

Views both_views(const TempDir& dir) {
  const std::string store = (dir / "store").string();
  Views v;
  v.verify = test::run(test::kiln_cli() + " verify " + store);
  v.resolve =
      test::run("KILN_ARTIFACT_PATH=" + store + " KILN_CACHE_DIR=" + (dir / "cache").string() +
                " KILN_OFFLINE=1 KILN_DISABLE_JIT=1 " + test::kiln_cli() + " resolve " + kUri +
                " --device sm_80 --explain");
  return v;
}

TEST(StoreRule, DirectoryNamedForAnotherTargetThanItsManifestIsRefusedByLoaderAndCliAlike) {
  TempDir dir;
  // Named for sm_90, holding sm_80's manifest: the old loader used it as sm_80 on a full scan
  // and skipped it on the fast path (by its name); `kiln verify` refused it.
  const std::string name =
      format::archive_stem("kiln-kernels", kiln::version(), kiln::cuda_version(), "sm_90");
  // The deliberate mismatch: sm_80's entry as install writes it, then renamed to sm_90's name.
  fs::rename(write_archive_dir(dir / "store", "sm_80"), dir / "store" / name);
  Views v = both_views(dir);
  const std::string why =
      (dir / "store" / name).string() + ": directory name does not match its manifest (expected '" +
      format::archive_stem("kiln-kernels", kiln::version(), kiln::cuda_version(), "sm_80") + "'";
  EXPECT_EQ(v.verify.exit_code, 10) << v.verify.out;  // format
  EXPECT_NE(v.verify.out.find(why), std::string::npos) << v.verify.out;
  EXPECT_EQ(v.resolve.exit_code, 6) << v.resolve.out;  // no source
  EXPECT_NE(v.resolve.out.find(why), std::string::npos) << v.resolve.out;
}

TEST(StoreRule, CacheJitDirectoryAndOtherDirectoriesAreNotArchivesForLoaderOrCli) {
  TempDir dir;
  // A cache directory as the loader leaves it, plus a directory an operator put there: the old
  // `kiln verify` reported each as an archive without a manifest.
  const std::string good =
      format::archive_stem("kiln-kernels", kiln::version(), kiln::cuda_version(), "sm_80");
  write_archive_dir(dir / "store", "sm_80");
  fs::create_directories(dir / "store" / "jit" / "sm_80");
  fs::create_directories(dir / "store" / "notes");
  Views v = both_views(dir);
  EXPECT_EQ(v.verify.exit_code, 0) << v.verify.out;
  // The paths, not the words: the checkout's own path (where the installed store is listed)
  // may contain "jit".
  const std::string jit = (dir / "store" / "jit").string(),
                    notes = (dir / "store" / "notes").string();
  EXPECT_EQ(v.verify.out.find(jit), std::string::npos) << v.verify.out;
  EXPECT_EQ(v.verify.out.find(notes), std::string::npos) << v.verify.out;
  EXPECT_NE(v.resolve.out.find(good), std::string::npos) << v.resolve.out;  // considered
  EXPECT_EQ(v.resolve.out.find(jit), std::string::npos) << v.resolve.out;
  EXPECT_EQ(v.resolve.out.find(notes), std::string::npos) << v.resolve.out;
}

TEST(StoreRule, ArchiveDirectoryNamesArePrefixedAndPlain) {
  EXPECT_TRUE(store::is_archive_dir_name("kiln-kernels-0.1.0-cuda13.0-sm_90a"));
  EXPECT_FALSE(store::is_archive_dir_name("kiln-kernels-"));
  EXPECT_FALSE(store::is_archive_dir_name("jit"));
  EXPECT_FALSE(store::is_archive_dir_name(".tmp-abcdef"));
  EXPECT_FALSE(store::is_archive_dir_name(".kiln-kernels-0.1.0-cuda13.0-sm_90a"));
  EXPECT_FALSE(store::is_archive_dir_name("kiln-kernels-x/../../etc"));
}

TEST(StoreRule, MissingOrPlainFileStoreIsReportedNotThrown) {
  TempDir dir;
  store::StoreListing absent = store::list_store_archive_dirs(dir / "absent");
  EXPECT_EQ(absent.status, store::ListingStatus::Absent);
  EXPECT_EQ(absent.problem, "does not exist");
  test::write_file(dir / "file", "x");
  store::StoreListing l = store::list_store_archive_dirs(dir / "file");
  EXPECT_FALSE(l.readable());
  EXPECT_EQ(l.status, store::ListingStatus::NotADirectory);
  EXPECT_EQ(l.problem, "not a directory");
}

// The listing reads entries by type, following links: a link to a directory counts, a dangling
// link or a link to a file does not, hidden and foreign names never; a store of more entries
// than one read of the directory returns is listed whole, sorted.
TEST(StoreRule, ListingFollowsLinksToDirectoriesAndReadsLargeStoresWhole) {
  TempDir dir;
  fs::path store = dir / "store";
  fs::create_directories(dir / "elsewhere" / "kiln-kernels-0.1.0-cuda13.0-sm_86");
  fs::create_directories(store / "kiln-kernels-0.1.0-cuda13.0-sm_80");
  fs::create_directories(store / ".kiln-kernels-0.1.0-cuda13.0-sm_90");
  fs::create_directories(store / "other-pkg-0.1.0-cuda13.0-sm_90");
  fs::create_symlink(dir / "elsewhere" / "kiln-kernels-0.1.0-cuda13.0-sm_86",
                     store / "kiln-kernels-0.1.0-cuda13.0-sm_86");
  fs::create_symlink(dir / "nowhere", store / "kiln-kernels-0.1.0-cuda13.0-sm_75");
  test::write_file(dir / "plain", "x");
  fs::create_symlink(dir / "plain", store / "kiln-kernels-0.1.0-cuda13.0-sm_89");
  test::write_file(store / "kiln-kernels-0.1.0-cuda13.0-sm_70", "a file, not a directory");

  store::StoreListing l = store::list_store_archive_dirs(store, "kiln-kernels");
  ASSERT_TRUE(l.readable()) << l.problem;
  EXPECT_EQ(l.archive_names, (std::vector<std::string>{"kiln-kernels-0.1.0-cuda13.0-sm_80",
                                                       "kiln-kernels-0.1.0-cuda13.0-sm_86"}));
  // Any package: the other package's directory too.
  EXPECT_EQ(store::list_store_archive_dirs(store).archive_names.size(), 3u);

  // 400 archive directories with long names: several reads of the directory.
  fs::path big = dir / "big";
  std::vector<std::string> want;
  for (int i = 0; i < 400; ++i) {
    std::string name = "kiln-kernels-0.1." + std::to_string(i) + "-cuda13.0-sm_90-" +
                       std::string(60, static_cast<char>('a' + i % 26));
    fs::create_directories(big / name);
    want.push_back(name);
  }
  std::sort(want.begin(), want.end());
  store::StoreListing b = store::list_store_archive_dirs(big, "kiln-kernels");
  ASSERT_TRUE(b.readable()) << b.problem;
  EXPECT_EQ(b.archive_names, want);
}

// A store directory is untrusted: a listing reads at most io::limits::kMaxStoreEntries entries and
// refuses a larger one with the limit named, listing nothing, rather than growing without end.
TEST(StoreRule, AStoreOfMoreEntriesThanTheLimitIsRefusedNamingIt) {
  TempDir dir;
  fs::path store = dir / "store";
  fs::create_directories(store / "kiln-kernels-0.1.0-cuda13.0-sm_90a");
  // Plain files with other names: cheap to make, counted all the same.
  for (std::uint64_t i = 1; i < io::limits::kMaxStoreEntries; ++i) {
    std::string name = (store / ("f" + std::to_string(i))).string();
    int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << name;
    ::close(fd);
  }
  store::StoreListing at_limit = store::list_store_archive_dirs(store, "kiln-kernels");
  ASSERT_TRUE(at_limit.readable()) << at_limit.problem;  // exactly the limit: listed
  EXPECT_EQ(at_limit.archive_names,
            std::vector<std::string>{"kiln-kernels-0.1.0-cuda13.0-sm_90a"});
  test::write_file(store / "one-more", "");
  store::StoreListing over = store::list_store_archive_dirs(store, "kiln-kernels");
  EXPECT_FALSE(over.readable());
  EXPECT_EQ(over.status, store::ListingStatus::Unlistable);
  EXPECT_TRUE(over.archive_names.empty());
  EXPECT_EQ(over.problem, "cannot be listed: it holds more than " +
                              std::to_string(io::limits::kMaxStoreEntries) +
                              " entries, the limit (docs/security.md)");
}

}  // namespace
}  // namespace kiln
