// The store scan kept between processes (core/store/scan_record.hpp): its format, and get()'s
// fast path writing and using records in a real cache directory. A "fresh process" is this one
// after forget_store_memory(), which drops what the store tier remembers in memory.
#include "store/scan_record.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "format/manifest.hpp"
#include "format/manifest_entry.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "kiln/loader.hpp"
#include "kiln/version.hpp"
#include "loader_factory.hpp"
#include "plan/resolver.hpp"
#include "stand_in_driver.hpp"
#include "store/store_scan.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

const std::string kPackage = "kiln-kernels";
const std::string kStore = "/srv/kiln/store";
const std::string kName = "kiln-kernels-0.1.0-cuda13.0-sm_90a";

store::ScanRecord sample_record() {
  store::ScanRecord r;
  r.package = kPackage;
  r.store = kStore;
  r.dir = {18446744073709551615ull, 42, 4096, -1'500'000'000, 1796127694121125312};
  r.names = {"kiln-kernels-0.1.0-cuda13.0-compute_80", kName};
  return r;
}

std::string sample_text() { return store::format_scan_record(sample_record()).value(); }

TEST(ScanRecordFormat, AWrittenRecordReadsBackAsWritten) {
  std::string text = sample_text();
  EXPECT_EQ(text.rfind("kiln-scan-record 3\nwriter kiln " + std::string(kiln::version()) +
                           " manifest-format " + std::to_string(format::kManifestFormat) +
                           "\npackage kiln-kernels\nstore /srv/kiln/store\n",
                       0),
            0u)
      << text;
  std::optional<store::ScanRecord> back = store::parse_scan_record(text, kPackage, kStore);
  ASSERT_TRUE(back) << text;
  EXPECT_TRUE(*back == sample_record());
  const std::string body = text.substr(0, text.rfind("end "));
  EXPECT_EQ(text.substr(text.find("\nname ")),
            "\nname kiln-kernels-0.1.0-cuda13.0-compute_80\nname " + kName + "\nend " +
                io::sha256_hex(body) + "\n");
  // No names: still a record.
  store::ScanRecord empty = sample_record();
  empty.names.clear();
  auto e = store::parse_scan_record(store::format_scan_record(empty).value(), kPackage, kStore);
  ASSERT_TRUE(e);
  EXPECT_TRUE(*e == empty);
}

TEST(ScanRecordFormat, EveryRecordCutShortIsRefused) {
  // A crash may leave any prefix behind (records are not fsync'ed): none of them is a record.
  std::string text = sample_text();
  for (std::size_t n = 0; n < text.size(); ++n)
    EXPECT_FALSE(store::parse_scan_record(text.substr(0, n), kPackage, kStore)) << n;
}

TEST(ScanRecordFormat, ARecordForAnotherStoreOrPackageOrOfAnotherShapeIsRefused) {
  const std::string text = sample_text();
  EXPECT_FALSE(store::parse_scan_record(text, "other-kernels", kStore));
  EXPECT_FALSE(store::parse_scan_record(text, kPackage, kStore + "/"));
  EXPECT_FALSE(store::parse_scan_record(text, kPackage, "/srv/kiln"));
  // Each case is judged by the parser, not by the digest: the changed text is sealed again with
  // its own digest (the last line), as a writer of that text would have.
  const std::string body = text.substr(0, text.rfind("end "));
  auto sealed = [](const std::string& b) { return b + "end " + io::sha256_hex(b) + "\n"; };
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string t = body;
    auto at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return sealed(t.replace(at, from.size(), to));
  };
  struct Case {
    const char* what;
    std::string text;
  } cases[] = {
      {"format 2 (without a digest)", replaced("kiln-scan-record 3", "kiln-scan-record 2")},
      {"format 1 (with manifest layouts)", replaced("kiln-scan-record 3", "kiln-scan-record 1")},
      {"another writer",
       replaced("writer kiln " + std::string(kiln::version()), "writer kiln 0.0.1")},
      {"a number with a leading zero", replaced(" 42 ", " 042 ")},
      {"a number of 2^64", replaced("18446744073709551615", "18446744073709551616")},
      {"an int64 past its bound", replaced("1796127694121125312", "9223372036854775808")},
      {"minus zero", replaced("-1500000000", "-0")},
      {"a sign on an unsigned field", replaced(" 42 ", " -42 ")},
      {"a missing field", replaced(" 42 4096", " 4096")},
      {"an extra field", replaced(" 1796127694121125312\n", " 1796127694121125312 7\n")},
      {"names out of order",
       replaced("name kiln-kernels-0.1.0-cuda13.0-compute_80\nname " + kName,
                "name " + kName + "\nname kiln-kernels-0.1.0-cuda13.0-compute_80")},
      {"a name twice", replaced("name kiln-kernels-0.1.0-cuda13.0-compute_80", "name " + kName)},
      {"another package's directory",
       replaced("name kiln-kernels-0.1.0-cuda13.0-compute_80", "name acme-0.1.0-cuda13.0-sm_80")},
      {"a hidden entry", replaced("name kiln-kernels-0.1.0-cuda13.0-compute_80", "name .tmp-1")},
      {"a manifest line of format 1",
       sealed(body + "manifest " + kName + " 1 2 3 4 5 236 31894 0\n")},
      {"an unknown line", sealed(body + "extra 1\n")},
      {"bytes after the end", text + "x"},
      {"a second end", text + "end\n"},
      {"CRLF lines", replaced("\npackage", "\r\npackage")},
      {"no end", body},
      {"an end without its digest", body + "end\n"},
      {"the digest of other bytes", body + "end " + io::sha256_hex(body + " ") + "\n"},
  };
  for (const auto& c : cases) EXPECT_FALSE(store::parse_scan_record(c.text, kPackage, kStore)) << c.what;
}

// Bit rot: one flipped bit anywhere, including one that would still parse (an archive name
// turned into another, hiding the real one), is a record ignored.
TEST(ScanRecordFormat, EveryFlippedByteIsRefused) {
  const std::string text = sample_text();
  for (std::size_t i = 0; i < text.size(); ++i)
    for (unsigned char bit : {0x01, 0x20}) {
      std::string t = text;
      t[i] = static_cast<char>(t[i] ^ bit);
      EXPECT_FALSE(store::parse_scan_record(t, kPackage, kStore)) << "byte " << i << " ^ " << int(bit);
    }
}

TEST(ScanRecordFormat, WhatOneLineCannotHoldIsNotWritten) {
  store::ScanRecord r = sample_record();
  r.store = "/srv/a\nstore";
  EXPECT_FALSE(store::format_scan_record(r));
  r = sample_record();
  r.names.push_back("kiln-kernels-0.2.0 x");
  EXPECT_FALSE(store::format_scan_record(r));
  r = sample_record();
  std::swap(r.names[0], r.names[1]);
  EXPECT_FALSE(store::format_scan_record(r));  // names not sorted
}

TEST(ScanRecordFormat, TheNextRecordKeepsNamesOnlyWhenTheyCannotHaveChangedUnseen) {
  const store::ScanRecord disk = sample_record();
  store::ScanLearned listed{disk.dir, true, disk.names, true, false};
  // The same listing again, nothing new: nothing to write.
  EXPECT_FALSE(store::next_scan_record(disk, kPackage, kStore, listed));
  // A listing through a link, or of a directory not settled: nothing to write either (the
  // record on disk, of another identity or none, is not used).
  store::ScanLearned linked = listed;
  linked.through_links = true;
  EXPECT_FALSE(store::next_scan_record(disk, kPackage, kStore, linked));
  store::ScanLearned unsettled = listed;
  unsettled.dir_settled = false;
  unsettled.dir.mtime_ns += 1;
  EXPECT_FALSE(store::next_scan_record(disk, kPackage, kStore, unsettled));
  // An archive gone, the directory settled again: the new names, under the new identity.
  store::ScanLearned changed = listed;
  changed.dir.mtime_ns += 1;
  changed.names = {"kiln-kernels-0.1.0-cuda13.0-compute_80"};
  std::optional<store::ScanRecord> next = store::next_scan_record(disk, kPackage, kStore, changed);
  ASSERT_TRUE(next);
  EXPECT_TRUE(next->dir == changed.dir);
  EXPECT_EQ(next->names, changed.names);
  ASSERT_TRUE(store::parse_scan_record(store::format_scan_record(*next).value(), kPackage, kStore));
  // No record yet: the listing is written.
  next = store::next_scan_record(std::nullopt, kPackage, kStore, listed);
  ASSERT_TRUE(next);
  EXPECT_TRUE(*next == disk);
  // Names not listed now and not the record's own (another identity): not kept.
  store::ScanLearned from_elsewhere = listed;
  from_elsewhere.listed_now = false;
  from_elsewhere.dir.ino += 1;
  EXPECT_FALSE(store::next_scan_record(disk, kPackage, kStore, from_elsewhere));
}

TEST(ScanRecordFormat, TheFileNameHashesPackageAndStoreUnderScan) {
  std::string a = store::scan_record_path("/c", kPackage, kStore);
  EXPECT_EQ(a.rfind("/c/scan/", 0), 0u);
  EXPECT_EQ(a.size(), std::string("/c/scan/").size() + 16);
  EXPECT_EQ(store::scan_record_path("/c/", kPackage, kStore), a);
  EXPECT_NE(store::scan_record_path("/c", "acme", kStore), a);
  EXPECT_NE(store::scan_record_path("/c", kPackage, kStore + "2"), a);
}

TEST(ScanRecordFormat, AFullScanDirectoryLosesItsLeastRecentlyWrittenRecordsNotTheNewOne) {
  TempDir tmp;
  const fs::path dir = tmp / "scan";
  fs::create_directories(dir);
  ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
  auto hex = [](int i) {
    char name[17];
    std::snprintf(name, sizeof name, "%016x", i);
    return std::string(name);
  };
  auto age = [](const fs::path& p, std::int64_t seconds_ago) {
    struct timespec t[2];
    ::clock_gettime(CLOCK_REALTIME, &t[0]);
    t[0].tv_sec -= seconds_ago;
    t[1] = t[0];
    ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), t, 0), 0);
  };
  // kMaxScanRecords old records, record i written i seconds after record i-1.
  const int n = static_cast<int>(store::kMaxScanRecords);
  for (int i = 0; i < n; ++i) {
    test::write_file(dir / hex(i), "x");
    age(dir / hex(i), 100000 - i);
  }
  test::write_file(dir / (hex(0) + ".tmp.1.0"), "a writer that died two hours ago");
  age(dir / (hex(0) + ".tmp.1.0"), 7200);
  test::write_file(dir / (hex(1) + ".tmp.1.0"), "a writer at work");
  test::write_file(dir / "notes.txt", "not a record");
  auto count = [&] {
    int records = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
      std::string name = e.path().filename().string();
      records += name.size() == 16 && name.find('.') == std::string::npos;
    }
    return records;
  };
  // At the limit: one more (an existing name) keeps them all.
  ASSERT_FALSE(store::write_scan_record((dir / hex(n - 1)).string(), sample_record()));
  EXPECT_EQ(count(), n);
  EXPECT_FALSE(fs::exists(dir / (hex(0) + ".tmp.1.0")));
  EXPECT_TRUE(fs::exists(dir / (hex(1) + ".tmp.1.0")));
  // One beyond: the oldest go, down to kKeepScanRecords; the new one and the newest stay.
  const std::string fresh = (dir / "ffffffffffffffff").string();
  ASSERT_FALSE(store::write_scan_record(fresh, sample_record()));
  EXPECT_EQ(count(), static_cast<int>(store::kKeepScanRecords));
  EXPECT_TRUE(fs::exists(fresh));
  EXPECT_TRUE(fs::exists(dir / hex(n - 2)));
  EXPECT_FALSE(fs::exists(dir / hex(0)));
  const int removed = n + 1 - static_cast<int>(store::kKeepScanRecords);
  EXPECT_FALSE(fs::exists(dir / hex(removed - 1)));
  EXPECT_TRUE(fs::exists(dir / hex(removed)));
  EXPECT_TRUE(fs::exists(dir / "notes.txt"));
}

// --- records on disk, written and used by get()'s fast path ---------------------------------

// Only files and directories unchanged for kRecordSettledNs are recorded (scan_record.hpp).
void let_settle() {
  std::this_thread::sleep_for(std::chrono::nanoseconds(store::kRecordSettledNs) +
                              std::chrono::milliseconds(100));
}

const std::string kUri = "axpy_dtype_f32";

struct StoreRig {
  TempDir tmp;
  fs::path store = tmp / "store";
  fs::path cache = tmp / "cache";
  test::ReleaseSpec rel;
  StoreRig() {
    rel.loadable = true;
    plan::forget_store_memory();
  }
  fs::path write(const std::string& target, const std::string& bytes = "") {
    rel.with_artifacts({{kUri, bytes.empty() ? "image:" + target : bytes}});
    return test::write_store_entry(store, rel, target);
  }
  plan::StoreScanner disk() const { return plan::StoreScanner(kPackage, kiln::version(), cache.string()); }
  plan::StoreScan scan() const { return disk().scan_for(store.string(), "artifact path", kUri, 90); }
  std::string record_path() const {
    return store::scan_record_path(cache.string(), kPackage, store.string());
  }
  std::optional<store::ScanRecord> record() const {
    return store::read_scan_record(record_path(), kPackage, store.string());
  }
  // The record as written, with no archive listed: still of this store's identity, so a
  // process that believes it finds nothing.
  store::ScanRecord hiding_record() const {
    store::ScanRecord r = record().value();
    r.names.clear();
    return r;
  }
  // The sha256 the scan's first archive gives kUri ("" when it lists none).
  static std::string sha(const plan::StoreScan& s) {
    if (s.archives.empty() || !s.archives[0].manifest) return "";
    const format::ArtifactEntry* a = s.archives[0].manifest->find(kUri);
    return a ? a->sha256 : "";
  }
};

std::string manifest_sha(const fs::path& dir) {
  return format::parse_manifest(test::read_file(dir / "manifest.json"), "m").find(kUri)->sha256;
}

TEST(ScanRecordOnDisk, ASettledScanIsRecordedWithTheListing) {
  StoreRig rig;
  fs::path dir = rig.write("sm_90");
  let_settle();
  plan::StoreScan s = rig.scan();
  ASSERT_TRUE(s.readable);
  EXPECT_EQ(StoreRig::sha(s), manifest_sha(dir));

  std::optional<store::ScanRecord> r = rig.record();
  ASSERT_TRUE(r) << rig.record_path();
  EXPECT_EQ(r->names, std::vector<std::string>{dir.filename().string()});
  EXPECT_TRUE(r->dir == io::identity_of(rig.store.string()).value());
  // The user's alone: the directory 0700, the file 0600; no temporary file left beside it.
  struct stat st {};
  ASSERT_EQ(::stat((rig.cache / "scan").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat(rig.record_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(rig.cache / "scan"))
    files.push_back(e.path().filename().string());
  EXPECT_EQ(files, std::vector<std::string>{fs::path(rig.record_path()).filename().string()});
}

TEST(ScanRecordOnDisk, AStoreJustWrittenIsNotRecorded) {
  StoreRig rig;
  fs::path dir = rig.write("sm_90");
  plan::StoreScan s = rig.scan();
  EXPECT_EQ(StoreRig::sha(s), manifest_sha(dir));
  EXPECT_FALSE(fs::exists(rig.record_path()));
}

TEST(ScanRecordOnDisk, AFreshProcessTakesTheListingFromTheRecord) {
  StoreRig rig;
  fs::path dir = rig.write("sm_90");
  let_settle();
  rig.scan();
  store::ScanRecord r = rig.record().value();
  // The same record with no names, in a fresh process: the store looks empty, so the listing
  // came from the record and not from the directory.
  ASSERT_FALSE(store::write_scan_record(rig.record_path(), rig.hiding_record()));
  plan::forget_store_memory();
  plan::StoreScan s = rig.scan();
  EXPECT_TRUE(s.readable);
  EXPECT_TRUE(s.archives.empty());
  // The true record back: the entry, from the manifest's own bytes.
  ASSERT_FALSE(store::write_scan_record(rig.record_path(), r));
  plan::forget_store_memory();
  EXPECT_EQ(StoreRig::sha(rig.scan()), manifest_sha(dir));
}

TEST(ScanRecordOnDisk, ARecordOthersCouldHaveWrittenIsIgnored) {
  StoreRig rig;
  fs::path dir = rig.write("sm_90");
  let_settle();
  rig.scan();
  const store::ScanRecord no_names = rig.hiding_record();
  ASSERT_FALSE(store::write_scan_record(rig.record_path(), no_names));
  // Writable by the group: not read; the store is listed, and the record written again whole.
  ASSERT_EQ(::chmod(rig.record_path().c_str(), 0620), 0);
  plan::forget_store_memory();
  EXPECT_EQ(StoreRig::sha(rig.scan()), manifest_sha(dir));
  ASSERT_TRUE(rig.record());
  EXPECT_EQ(rig.record()->names.size(), 1u);
  // A symbolic link to a record: not followed.
  ASSERT_FALSE(store::write_scan_record(rig.record_path() + "-elsewhere", no_names));
  fs::remove(rig.record_path());
  fs::create_symlink(rig.record_path() + "-elsewhere", rig.record_path());
  plan::forget_store_memory();
  EXPECT_EQ(StoreRig::sha(rig.scan()), manifest_sha(dir));
  EXPECT_FALSE(fs::is_symlink(rig.record_path())) << "replaced by a record of its own";
  // Owned by another user (only root can make one).
  if (::geteuid() != 0) GTEST_SKIP() << "not root: cannot give a record to another user";
  ASSERT_FALSE(store::write_scan_record(rig.record_path(), no_names));
  ASSERT_EQ(::chown(rig.record_path().c_str(), 65534, 65534), 0);
  plan::forget_store_memory();
  EXPECT_EQ(StoreRig::sha(rig.scan()), manifest_sha(dir));
  // A scan directory of another user is not written into either.
  ASSERT_EQ(::chown((rig.cache / "scan").c_str(), 65534, 65534), 0);
  EXPECT_TRUE(store::write_scan_record(rig.record_path(), no_names));
}

TEST(ScanRecordOnDisk, AnArchiveAddedOrAManifestRewrittenIsSeenAndRecorded) {
  StoreRig rig;
  rig.write("sm_90");
  let_settle();
  rig.scan();
  ASSERT_EQ(rig.record().value().names.size(), 1u);
  // A new archive: the directory's identity changes, the record's names are not used.
  fs::path sm90a = rig.write("sm_90a");
  let_settle();
  plan::forget_store_memory();
  plan::StoreScan s = rig.scan();
  ASSERT_FALSE(s.archives.empty());
  EXPECT_EQ(s.archives[0].dir, sm90a.string()) << "the best target, listed from the directory";
  EXPECT_EQ(rig.record().value().names.size(), 2u);
  // sm_90a's manifest rewritten with other bytes (the store's listing unchanged): a fresh
  // process reads the new entry from the file.
  fs::path again = rig.write("sm_90a", "other image bytes, longer than before");
  ASSERT_EQ(again, sm90a);
  plan::forget_store_memory();
  plan::StoreScan rewritten = rig.scan();
  EXPECT_EQ(StoreRig::sha(rewritten), manifest_sha(sm90a));
  EXPECT_EQ(StoreRig::sha(rewritten),
            io::sha256_hex(std::string("other image bytes, longer than before")));
}

TEST(ScanRecordOnDisk, ArchiveDirectoriesReachedThroughLinksAreListedByEveryProcess) {
  // A link's target can appear, vanish or change while the store directory keeps its
  // identity: a listing that went through a link keeps no names.
  StoreRig rig;
  fs::path elsewhere = rig.tmp / "elsewhere";
  fs::create_directories(rig.store);
  test::ReleaseSpec rel = rig.rel;
  rel.with_artifacts({{kUri, "image:sm_90"}});
  const std::string stem =
      format::archive_stem(kPackage, kiln::version(), kiln::cuda_version(), "sm_90");
  fs::create_symlink(elsewhere / stem, rig.store / stem);  // dangling: a share not mounted
  let_settle();
  plan::StoreScan s = rig.scan();
  EXPECT_TRUE(s.archives.empty());
  std::optional<store::ScanRecord> r = rig.record();
  if (r) {
    EXPECT_TRUE(r->dir == io::FileIdentity{}) << "names kept for a listing through a link";
    EXPECT_TRUE(r->names.empty());
  }
  // The share appears: the next process lists the store again and finds it.
  fs::path dir = test::write_store_entry(elsewhere, rel, "sm_90");
  ASSERT_EQ(dir.filename().string(), stem);
  plan::forget_store_memory();
  EXPECT_EQ(StoreRig::sha(rig.scan()), manifest_sha(dir));
}

TEST(ScanRecordOnDisk, AFullScanListsTheStoreItselfWhateverARecordSays) {
  StoreRig rig;
  fs::path dir = rig.write("sm_90");
  let_settle();
  rig.scan();
  const store::ScanRecord no_names = rig.hiding_record();
  ASSERT_FALSE(store::write_scan_record(rig.record_path(), no_names));
  plan::forget_store_memory();
  EXPECT_TRUE(rig.scan().archives.empty()) << "the fast path takes the record's names";
  // The full scan (a failure's explanation, kiln verify's rule) lists the directory.
  plan::StoreScan full = rig.disk().scan(rig.store.string(), "artifact path");
  ASSERT_EQ(full.archives.size(), 1u);
  EXPECT_EQ(full.archives[0].dir, dir.string());
}

TEST(ScanRecordOnDisk, ARecordThatCannotBeReadOrWrittenCostsNothingButTime) {
  StoreRig rig;
  fs::path dir = rig.write("sm_90");
  let_settle();
  // Cut short (a crash while written): ignored, and replaced by a whole one.
  rig.scan();
  std::string text = test::read_file(rig.record_path());
  test::write_file(rig.record_path(), text.substr(0, text.size() / 2));
  plan::forget_store_memory();
  EXPECT_EQ(StoreRig::sha(rig.scan()), manifest_sha(dir));
  EXPECT_EQ(test::read_file(rig.record_path()), text);
  // A cache directory that cannot be made (a file is in its place): the scan is the same.
  test::write_file(rig.tmp / "file", "x");
  plan::StoreScanner blocked(kPackage, kiln::version(), (rig.tmp / "file" / "cache").string());
  plan::forget_store_memory();
  plan::StoreScan s = blocked.scan_for(rig.store.string(), "artifact path", kUri, 90);
  EXPECT_EQ(StoreRig::sha(s), manifest_sha(dir));
}

TEST(ScanRecordOnDisk, ALoaderLoadsTheSameBytesWithItsRecordAndDespiteALyingOne) {
  StoreRig rig;
  fs::path dir = rig.write("sm_90", "the sm_90 image of axpy");
  let_settle();
  const std::string artifact = (dir / (kUri + ".fatbin")).string();
  // A Loader as an offline application makes it, over the real store and cache directory.
  auto new_loader = [&](std::shared_ptr<test::Cc90Driver> driver) {
    LoaderConfig cfg;
    cfg.artifact_path = {rig.store.string()};
    cfg.cache_dir = rig.cache.string();
    cfg.offline = true;
    cfg.disable_jit = true;
    plan::LoaderDeps deps;
    deps.driver = std::move(driver);
    deps.installed_store = (rig.tmp / "installed").string();
    return make_loader(test::reference_description(), cfg, std::move(deps));
  };
  auto load = [&] {
    auto driver = std::make_shared<test::Cc90Driver>();
    EXPECT_EQ(new_loader(driver)->get(kUri).origin, artifact);
    EXPECT_EQ(driver->images, std::vector<std::string>{"the sm_90 image of axpy"});
  };
  plan::forget_store_memory();
  load();  // lists, looks the URI up in the manifest, writes the record
  ASSERT_TRUE(rig.record());
  plan::forget_store_memory();
  load();  // from the record
  // A record whose names hide the archive: the fast path finds nothing in the artifact path,
  // and the loader's full scan, which lists the store itself, still loads the same bytes.
  const store::ScanRecord hiding = rig.hiding_record();
  ASSERT_FALSE(store::write_scan_record(rig.record_path(), hiding));
  plan::forget_store_memory();
  load();
  // The artifact changed behind an unchanged manifest: the record does not spare the hash.
  test::write_file(dir / (kUri + ".fatbin"), "the sm_90 image of axpX");
  plan::forget_store_memory();
  auto driver = std::make_shared<test::Cc90Driver>();
  try {
    new_loader(driver)->get(kUri);
    ADD_FAILURE() << "a changed artifact was loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Integrity) << e.what();
    EXPECT_NE(std::string(e.what()).find(artifact + ": integrity"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(driver->images.empty()) << "nothing reached the driver";
}

}  // namespace
}  // namespace kiln
