// Unit tests of the fetch logic: the retry decision and the mirror/trust state machine over a
// fake transport (no sockets). Real servers are in tests/integration/fetch_loopback_test.cpp.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <set>

#include "fetch/fetch.hpp"
#include "fetch/fetch_internal.hpp"
#include "fetch/tuf_mirror.hpp"
#include "format/manifest.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "kiln/version.hpp"
#include "store/index_entry_check.hpp"
#include "synthetic_release.hpp"
#include "test_util.hpp"
#include "transport/http_transport.hpp"
#include "tuf/tuf_metadata.hpp"

namespace kiln {
namespace {

using transport::decide_retry;
using transport::error_kind;
using transport::RetryPolicy;
using transport::TransferResult;
using transport::TransferStatus;

TransferResult http(long code, std::optional<long> retry_after = std::nullopt) {
  TransferResult r;
  r.status = TransferStatus::Http;
  r.http_status = code;
  r.retry_after_s = retry_after;
  return r;
}
TransferResult status(TransferStatus s) {
  TransferResult r;
  r.status = s;
  return r;
}

TEST(RetryDecision, ServerErrorsAndConnectionFailuresAreRetriedWithGrowingBackoff) {
  RetryPolicy p{3, 100, 10000};
  auto d1 = decide_retry(http(500), 1, p);
  auto d2 = decide_retry(http(503), 2, p);
  auto d3 = decide_retry(status(TransferStatus::Connection), 3, p);
  EXPECT_TRUE(d1.retry);
  EXPECT_EQ(d1.delay_ms, 100);
  EXPECT_TRUE(d2.retry);
  EXPECT_EQ(d2.delay_ms, 200);
  EXPECT_TRUE(d3.retry);
  EXPECT_EQ(d3.delay_ms, 400);
  EXPECT_TRUE(decide_retry(status(TransferStatus::Timeout), 1, p).retry);
}

TEST(RetryDecision, StopsAfterMaxRetries) {
  RetryPolicy p{2, 100, 10000};
  EXPECT_TRUE(decide_retry(http(500), 2, p).retry);
  auto d = decide_retry(http(500), 3, p);
  EXPECT_FALSE(d.retry);
  EXPECT_NE(d.reason.find("3 attempts"), std::string::npos) << d.reason;
  EXPECT_FALSE(decide_retry(http(500), 1, RetryPolicy{0, 100, 1000}).retry);
}

TEST(RetryDecision, NotFoundForbiddenTlsAndRefusedRedirectsAreNeverRetried) {
  RetryPolicy p{5, 100, 10000};
  for (long code : {400L, 401L, 403L, 404L, 410L})
    EXPECT_FALSE(decide_retry(http(code), 1, p).retry) << code;
  for (auto s : {TransferStatus::Tls, TransferStatus::Refused, TransferStatus::Missing,
                 TransferStatus::Deadline, TransferStatus::Aborted, TransferStatus::Ok})
    EXPECT_FALSE(decide_retry(status(s), 1, p).retry) << to_string(s);
}

// The one rule for what a failed transfer means: not there is NotFound, anything else Network.
TEST(TransferErrorKind, MissingFilesAreNotFoundAndEveryOtherFailureIsNetwork) {
  for (long code : {404L, 410L}) EXPECT_EQ(error_kind(http(code)), ErrorKind::NotFound) << code;
  EXPECT_EQ(error_kind(status(TransferStatus::Missing)), ErrorKind::NotFound);
  for (long code : {400L, 401L, 403L, 408L, 429L, 500L, 503L})
    EXPECT_EQ(error_kind(http(code)), ErrorKind::Network) << code;
  for (auto s : {TransferStatus::Connection, TransferStatus::Timeout, TransferStatus::Deadline,
                 TransferStatus::Tls, TransferStatus::Refused})
    EXPECT_EQ(error_kind(status(s)), ErrorKind::Network) << to_string(s);
}

TEST(RetryDecision, TooManyRequestsHonoursRetryAfterCapped) {
  RetryPolicy p{3, 100, 5000};
  auto d = decide_retry(http(429, 2), 1, p);
  EXPECT_TRUE(d.retry);
  EXPECT_EQ(d.delay_ms, 2000);
  EXPECT_EQ(decide_retry(http(429, 3600), 1, p).delay_ms, 5000);  // capped
  EXPECT_EQ(decide_retry(http(429), 1, p).delay_ms, 100);         // no header: backoff
  EXPECT_EQ(decide_retry(http(503, 1), 1, p).delay_ms, 1000);
}

TEST(RetryDecision, BackoffIsCapped) {
  RetryPolicy p{40, 1000, 8000};
  EXPECT_EQ(decide_retry(http(502), 30, p).delay_ms, 8000);
}

TEST(RetryAfter, ParsesDeltaSecondsOnly) {
  EXPECT_EQ(transport::parse_retry_after_seconds(" 7\r\n"), 7);
  EXPECT_EQ(transport::parse_retry_after_seconds("0"), 0);
  EXPECT_FALSE(transport::parse_retry_after_seconds("-1"));
  EXPECT_FALSE(transport::parse_retry_after_seconds("soon"));
  EXPECT_FALSE(transport::parse_retry_after_seconds(""));
}

TEST(RetryAfter, HeaderLineGivesItsValueOnlyForThatHeaderInAnyCase) {
  EXPECT_EQ(transport::header_value("Retry-After: 7\r\n", "retry-after"), " 7\r\n");
  EXPECT_EQ(transport::header_value("RETRY-AFTER:soon", "retry-after"), "soon");
  EXPECT_FALSE(transport::header_value("Retry-After-Not: 7\r\n", "retry-after"));
  EXPECT_FALSE(transport::header_value("Content-Length: 7\r\n", "retry-after"));
  EXPECT_FALSE(transport::header_value("no colon here\r\n", "retry-after"));
}

TEST(RetryAfter, SecondsOrAnHttpDateCountedFromNow) {
  const std::time_t now = 1700000000;  // Tue, 14 Nov 2023 22:13:20 GMT
  EXPECT_EQ(transport::parse_retry_after(" 120\r\n", now), 120);
  EXPECT_EQ(transport::parse_retry_after(" Tue, 14 Nov 2023 22:14:20 GMT\r\n", now), 60);
  EXPECT_EQ(transport::parse_retry_after(" Mon, 13 Nov 2023 22:13:20 GMT\r\n", now), 0);
  EXPECT_FALSE(transport::parse_retry_after(" soon\r\n", now));
  EXPECT_FALSE(transport::parse_retry_after(" \r\n", now));
}

TEST(MirrorUrl, NormalisesTrailingSlashAndBarePathsAndRefusesOtherSchemes) {
  EXPECT_EQ(fetch::normalise_mirror("https://m.example/rel/"), "https://m.example/rel");
  EXPECT_EQ(fetch::normalise_mirror("/srv/rel"), "file:///srv/rel");
  try {
    fetch::normalise_mirror("ftp://m.example/rel");
    FAIL() << "ftp accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage);
    EXPECT_NE(std::string(e.what()).find("ftp://m.example/rel"), std::string::npos);
  }
}

// A mirror set in memory: url -> scripted responses (the last one repeats).
class FakeTransport : public transport::Transport {
 public:
  struct Reply {
    TransferResult result;
    std::string body;
  };
  std::map<std::string, std::vector<Reply>> replies;
  std::map<std::string, int> calls;
  std::vector<transport::TransferRequest> requests;
  std::function<void()> on_call;  // e.g. advance a fake clock: each request "takes time"
  std::mutex mu;

  TransferResult get(const transport::TransferRequest& req,
                     const transport::Sink& sink) override {
    Reply r;
    {
      std::lock_guard<std::mutex> g(mu);
      int n = calls[req.url]++;
      requests.push_back(req);
      if (on_call) on_call();
      auto it = replies.find(req.url);
      if (it == replies.end()) return http(404);
      r = it->second[std::min<std::size_t>(n, it->second.size() - 1)];
    }
    if (r.result.status == TransferStatus::Ok && !r.body.empty() &&
        !sink(r.body.data(), r.body.size()))
      return status(TransferStatus::Aborted);
    return r.result;
  }
  void serve(const std::string& url, const std::string& body) {
    replies[url] = {Reply{status(TransferStatus::Ok), body}};
  }
};

// What the fake mirrors serve: the shared fixture's release (this kiln's version and CUDA), its
// index pinning one sm_90a archive. The archive's bytes are a short stand-in: the installer is
// fake and never unpacks them, and the deadline tests count its size in seconds.
struct FakeRelease {
  test::ReleaseSpec spec;
  std::string package = spec.package;
  std::string version = spec.version;
  std::string archive_bytes = "pretend this is a tar.zst";
  format::IndexEntry entry = test::release_index_entry(spec, "sm_90a", archive_bytes);
  std::string archive_name = entry.file;
  std::string index_json = format::index_to_json(test::release_index(spec, {entry}));
};

class FetchLogic : public ::testing::Test {
 protected:
  void SetUp() override { transport::forget_bad_mirrors(); }
  fetch::FetchResult fetch(fetch::FetchOptions opts) {
    fetch::FetchDeps deps;
    deps.transport = &transport;
    deps.sleep_ms = [this](long ms) { slept.push_back(ms); };
    deps.verified_present = [this](const std::filesystem::path&, const std::string& stem) {
      return installed.count(stem) > 0;
    };
    deps.install = [this](const std::filesystem::path& archive, const std::filesystem::path& store,
                          const std::string& sha) {
      EXPECT_EQ(io::sha256_file(archive), sha);  // only verified bytes reach the installer
      std::string stem = archive.filename().string();
      stem = stem.substr(0, stem.size() - 8);
      installed.insert(stem);
      return (store / stem).string();
    };
    deps.read_manifest = [this](const std::filesystem::path& archive) {
      EXPECT_TRUE(std::filesystem::exists(archive));
      ++manifests_read;
      return manifest;
    };
    deps.now_ms = [this] { return clock_ms; };
    return fetch::fetch_targets_with(opts, {"sm_90a"}, dir.path().string(), deps);
  }
  fetch::FetchOptions options(std::vector<std::string> mirrors) {
    fetch::FetchOptions o;
    o.mirrors = std::move(mirrors);
    o.package = rel.package;
    o.version = rel.version;
    o.index_sha256 = io::sha256_hex(rel.index_json);
    return o;
  }
  test::TempDir dir;
  FakeTransport transport;
  FakeRelease rel;
  std::vector<long> slept;
  std::set<std::string> installed;
  std::int64_t clock_ms = 1000000;
  int manifests_read = 0;
  // What the downloaded archive's manifest says: by default, what the index entry says.
  std::optional<format::Manifest> manifest = test::release_manifest(rel.spec, "sm_90a");
  void serve_release(const std::string& mirror) {
    transport.serve(mirror + "/" + format::index_file_name("kiln-kernels", rel.version), rel.index_json);
    transport.serve(mirror + "/" + rel.archive_name, rel.archive_bytes);
  }
  std::vector<std::string> store_files() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir.path()))
      if (e.path().filename() != ".kiln-locks") out.push_back(e.path().filename().string());
    return out;
  }
};

TEST_F(FetchLogic, OfflineFailsAtOnceWithoutAnyTransferAndNamesTheCommand) {
  fetch::FetchOptions o = options({"https://a.example"});
  o.offline = true;
  try {
    fetch(o);
    FAIL() << "offline fetch succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::NotFound);
    EXPECT_NE(std::string(e.what()).find("--targets sm_90a"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(transport.calls.empty());
}

TEST_F(FetchLogic, CorruptFirstMirrorFallsBackAndIsNotAskedAgain) {
  std::string a = "https://a.example", b = "https://b.example";
  transport.serve(a + "/" + format::index_file_name("kiln-kernels", rel.version), rel.index_json);
  transport.serve(b + "/" + format::index_file_name("kiln-kernels", rel.version), rel.index_json);
  std::string bad = rel.archive_bytes;
  bad[3] ^= 1;
  transport.serve(a + "/" + rel.archive_name, bad);
  transport.serve(b + "/" + rel.archive_name, rel.archive_bytes);
  fetch::FetchResult r = fetch(options({a, b}));
  ASSERT_EQ(r.installed.size(), 1u);
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_EQ(r.failures[0].mirror, a);
  EXPECT_NE(r.failures[0].what.find("SHA-256 mismatch"), std::string::npos) << r.failures[0].what;
  EXPECT_TRUE(transport::is_mirror_bad(a));
  EXPECT_FALSE(transport::is_mirror_bad(b));
  // A second run in this process skips the distrusted mirror, even for the index.
  installed.clear();
  fetch::FetchResult r2 = fetch(options({a, b}));
  EXPECT_EQ(transport.calls[a + "/" + format::index_file_name("kiln-kernels", rel.version)], 1);
  EXPECT_EQ(transport.calls[a + "/" + rel.archive_name], 1);
  EXPECT_EQ(r2.installed.size(), 1u);
}

TEST_F(FetchLogic, IndexNotMatchingThePinIsRefusedNamingBothDigests) {
  std::string a = "https://a.example";
  std::string forged = rel.index_json + " ";
  transport.serve(a + "/" + format::index_file_name("kiln-kernels", rel.version), forged);
  try {
    fetch(options({a}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Integrity);
    std::string m = e.what();
    EXPECT_NE(m.find(io::sha256_hex(rel.index_json)), std::string::npos) << m;
    EXPECT_NE(m.find(io::sha256_hex(forged)), std::string::npos) << m;
    EXPECT_NE(m.find(a), std::string::npos) << m;
  }
}

TEST_F(FetchLogic, ServerErrorIsRetriedThenSucceeds) {
  std::string a = "https://a.example";
  transport.serve(a + "/" + format::index_file_name("kiln-kernels", rel.version), rel.index_json);
  transport.replies[a + "/" + rel.archive_name] = {{http(500), ""},
                                                   {status(TransferStatus::Ok), rel.archive_bytes}};
  fetch::FetchOptions o = options({a});
  o.retry_base_ms = 250;
  fetch::FetchResult r = fetch(o);
  EXPECT_EQ(r.installed.size(), 1u);
  EXPECT_EQ(slept, std::vector<long>{250});
  EXPECT_EQ(transport.calls[a + "/" + rel.archive_name], 2);
}

TEST_F(FetchLogic, NotFoundIsNotRetriedAndTheErrorNamesEveryMirror) {
  std::string a = "https://a.example", b = "http://b.example";
  transport.serve(a + "/" + format::index_file_name("kiln-kernels", rel.version), rel.index_json);
  try {
    fetch(options({a, b}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::NotFound);
    std::string m = e.what();
    EXPECT_NE(m.find(a + "/" + rel.archive_name + ": HTTP 404"), std::string::npos) << m;
    EXPECT_NE(m.find(b), std::string::npos) << m;
  }
  EXPECT_EQ(transport.calls[a + "/" + rel.archive_name], 1);
  EXPECT_TRUE(slept.empty());
}

TEST_F(FetchLogic, NoPinnedDigestRefusesBeforeAnyTransfer) {
  fetch::FetchOptions o = options({"https://a.example"});
  o.index_sha256.clear();
  if (!fetch::default_index_sha256().empty()) GTEST_SKIP() << "this build has a compiled-in pin";
  try {
    fetch(o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage);
    EXPECT_NE(std::string(e.what()).find("--index-sha256"), std::string::npos);
  }
  EXPECT_TRUE(transport.calls.empty());
}

TEST_F(FetchLogic, AlreadyInstalledNeedsNoNetwork) {
  installed.insert(format::archive_stem("kiln-kernels", rel.version, cuda_version(), "sm_90a"));
  fetch::FetchOptions o = options({"https://a.example"});
  fetch::FetchResult r = fetch(o);
  EXPECT_EQ(r.already_present.size(), 1u);
  EXPECT_TRUE(transport.calls.empty());
  o.offline = true;
  EXPECT_EQ(fetch(o).already_present.size(), 1u);
}

// --- the manifest against its index entry (issue 12, item 4) ----------------------------------

TEST_F(FetchLogic, ArchiveWhoseManifestNamesAnotherTargetIsRefusedAsIntegrityBeforeInstall) {
  std::string a = "https://a.example";
  serve_release(a);
  manifest->target = "sm_80";  // the index pinned the sm_80 archive's bytes under sm_90a
  try {
    fetch(options({a}));
    FAIL() << "installed an sm_80 archive as sm_90a";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Integrity);
    std::string m = e.what();
    EXPECT_NE(m.find(a + "/" + rel.archive_name), std::string::npos) << m;
    EXPECT_NE(m.find("manifest target is sm_80"), std::string::npos) << m;
    EXPECT_NE(m.find("says sm_90a"), std::string::npos) << m;
  }
  EXPECT_EQ(manifests_read, 1);
  EXPECT_TRUE(installed.empty());
  EXPECT_TRUE(store_files().empty()) << store_files().front();  // downloaded archive removed
  EXPECT_FALSE(transport::is_mirror_bad(a));  // the mirror served what the pin says
}

TEST_F(FetchLogic, ArchiveOfAnotherReleaseOrToolkitIsRefusedAsStale) {
  std::string a = "https://a.example";
  serve_release(a);
  manifest->package_version = "0.0.1";
  manifest->cuda_version = "11.8";
  try {
    fetch(options({a}));
    FAIL() << "installed an archive of release 0.0.1";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Stale);
    std::string m = e.what();
    EXPECT_NE(m.find("manifest package_version is 0.0.1"), std::string::npos) << m;
    EXPECT_NE(m.find("says " + rel.version), std::string::npos) << m;
    EXPECT_NE(m.find("manifest cuda_version is 11.8"), std::string::npos) << m;
  }
  EXPECT_TRUE(installed.empty());
  EXPECT_TRUE(store_files().empty());
}

TEST_F(FetchLogic, ArchiveWithoutALeadingManifestIsLeftToTheInstallerToRefuse) {
  std::string a = "https://a.example";
  serve_release(a);
  manifest.reset();
  EXPECT_EQ(fetch(options({a})).installed.size(), 1u);  // the fake installer accepts anything
}

TEST(ManifestIndexCheck, NamesEveryDifferingFieldWithBothValuesAndTheWorstKind) {
  test::ReleaseSpec rel;
  rel.version = "1.2.0";
  rel.cuda_version = "13.0";
  format::IndexEntry e = test::release_index_entry(rel, "sm_90a", "archive bytes");
  format::Index idx = test::release_index(rel, {e});
  format::Manifest m = test::release_manifest(rel, "sm_90a");
  EXPECT_TRUE(store::manifest_index_problems(m, e, idx, "A", "I").empty());
  EXPECT_NO_THROW(store::require_manifest_matches_index(m, e, idx, "A", "I"));
  m.cuda_version = "12.8";
  auto p = store::manifest_index_problems(m, e, idx, "A", "I");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].kind, ErrorKind::Stale);
  EXPECT_EQ(p[0].field, "cuda_version");
  EXPECT_EQ(p[0].message, "A: manifest cuda_version is 12.8, I says 13.0");
  m.target = "sm_80";
  p = store::manifest_index_problems(m, e, idx, "A", "I");
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].field, "target");
  EXPECT_EQ(p[0].kind, ErrorKind::Integrity);
  try {
    store::require_manifest_matches_index(m, e, idx, "A", "I");
    FAIL();
  } catch (const Error& err) {
    EXPECT_EQ(err.kind(), ErrorKind::Integrity);  // the worse of the two
    EXPECT_NE(std::string(err.what()).find("manifest target is sm_80, I says sm_90a"),
              std::string::npos);
  }
}

// --- deadlines (issue 12, item 5) ---------------------------------------------------------------

TEST(DownloadDeadline, PinnedSizeGetsTheFloorPlusItsBytesAtTheMinimumRate) {
  fetch::FetchOptions o;
  o.download_timeout_ms = 2000;
  o.download_min_rate = 1000;
  EXPECT_EQ(fetch::download_deadline_ms(o, 0), 2000);
  EXPECT_EQ(fetch::download_deadline_ms(o, 5000), 7000);
  EXPECT_EQ(fetch::download_deadline_ms(o, 5000, 99999), 7000);  // per attempt
  fetch::FetchOptions d;  // defaults: 60 s + size at 64 KiB/s; a 100 MiB archive gets 1660 s
  EXPECT_EQ(fetch::download_deadline_ms(d, 100u << 20), 60000 + 1600 * 1000);
  o.download_min_rate = 1;
  EXPECT_EQ(fetch::download_deadline_ms(o, ~std::uint64_t{0}),
            std::numeric_limits<long>::max());  // saturates, no overflow
}

TEST(DownloadDeadline, AFileOnlyABoundLimitsGetsSixtySecondsPerMirrorWhateverTheBound) {
  fetch::FetchOptions d;  // defaults
  // Before (issue 26, item 3): the index was counted at its 16 MiB bound, 60 s + 256 s.
  EXPECT_EQ(fetch::download_deadline_ms(d, fetch::kMaxIndexBytes), 316000);
  // Now: 60 s for every attempt on the mirror together; what earlier ones took is gone.
  EXPECT_EQ(fetch::download_deadline_ms(d, std::nullopt), 60000);
  EXPECT_EQ(fetch::download_deadline_ms(d, std::nullopt, 25000), 35000);
  EXPECT_EQ(fetch::download_deadline_ms(d, std::nullopt, 60000), 0);
  EXPECT_EQ(fetch::download_deadline_ms(d, std::nullopt, 90000), 0);
  // 60 s at the 64 KiB/s a real slow link is assumed to have: 3.75 MiB, far above a real index
  // (a few KB per release) or TUF metadata file.
  EXPECT_GE(60 * d.download_min_rate, 3840 * 1024);
}

TEST_F(FetchLogic, EveryRequestCarriesItsDeadlineCappedByWhatIsLeftOfTheCommand) {
  std::string a = "https://a.example";
  serve_release(a);
  fetch::FetchOptions o = options({a});
  o.download_timeout_ms = 1000;
  o.download_min_rate = 1;  // 1 byte/s: the archive's size in seconds
  o.timeout_ms = 50000;
  transport.on_call = [this] { clock_ms += 10000; };
  fetch(o);
  ASSERT_EQ(transport.requests.size(), 2u);
  // The index: only a bound limits it, so its deadline does not scale: the 1 s floor.
  EXPECT_EQ(transport.requests[0].total_timeout_ms, 1000);
  // The archive: 1 s + its size at 1 byte/s, well within the 40 s left.
  EXPECT_EQ(transport.requests[1].total_timeout_ms,
            1000 + static_cast<long>(rel.archive_bytes.size()) * 1000);
  ASSERT_LT(transport.requests[1].total_timeout_ms, 40000);
}

TEST_F(FetchLogic, AStallingIndexMirrorGetsSixtySecondsForAllItsAttemptsThenTheNextServes) {
  std::string a = "https://a.example", b = "https://b.example";
  serve_release(a);
  serve_release(b);
  const std::string index_a = a + "/" + format::index_file_name("kiln-kernels", rel.version);
  // Drips just fast enough for 25 s, then stalls: a timeout, which is retried.
  transport.replies[index_a] = {{status(TransferStatus::Timeout), ""}};
  transport.on_call = [this] { clock_ms += 25000; };
  std::vector<std::int64_t> asked_at;
  fetch::FetchOptions o = options({a, b});
  o.retry_base_ms = 4000;
  fetch::FetchDeps deps;
  deps.transport = &transport;
  deps.sleep_ms = [this](long ms) {
    slept.push_back(ms);
    clock_ms += ms;
  };
  deps.verified_present = [](const std::filesystem::path&, const std::string&) { return false; };
  deps.install = [](const std::filesystem::path&, const std::filesystem::path& store,
                    const std::string&) { return store.string(); };
  deps.read_manifest = [this](const std::filesystem::path&) { return manifest; };
  deps.now_ms = [this] { return clock_ms; };
  const std::int64_t t0 = clock_ms;
  fetch::FetchResult r = fetch::fetch_targets_with(o, {"sm_90a"}, dir.path().string(), deps);
  EXPECT_EQ(r.installed.size(), 1u);
  // 25 s, backoff 4 s, 25 s; the next backoff (8 s) would outlast the 6 s left: b is asked.
  EXPECT_EQ(transport.calls[index_a], 2);
  ASSERT_GE(transport.requests.size(), 3u);
  EXPECT_EQ(transport.requests[0].total_timeout_ms, 60000);
  EXPECT_EQ(transport.requests[1].total_timeout_ms, 31000);
  EXPECT_EQ(transport.requests[2].url, b + "/" + format::index_file_name("kiln-kernels", rel.version));
  EXPECT_EQ(slept, (std::vector<long>{4000}));
  // b was asked once a's 60 s were spent, not 4 x (60 s + 256 s) later.
  EXPECT_LE(clock_ms - t0, 60000 + 2 * 25000);
  ASSERT_FALSE(r.failures.empty());
  EXPECT_NE(r.failures.back().what.find("timed out"), std::string::npos) << r.failures.back().what;
}

TEST_F(FetchLogic, MirrorPastItsDeadlineIsNotRetriedAndTheNextMirrorServes) {
  std::string a = "https://a.example", b = "https://b.example";
  serve_release(a);
  serve_release(b);
  TransferResult late = status(TransferStatus::Deadline);
  late.message = "not done within its deadline of 1000 ms";
  transport.replies[a + "/" + rel.archive_name] = {{late, ""}};
  fetch::FetchResult r = fetch(options({a, b}));
  EXPECT_EQ(r.installed.size(), 1u);
  EXPECT_EQ(transport.calls[a + "/" + rel.archive_name], 1);
  EXPECT_EQ(transport.calls[b + "/" + rel.archive_name], 1);
  EXPECT_TRUE(slept.empty());
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_NE(r.failures[0].what.find("deadline passed"), std::string::npos) << r.failures[0].what;
}

TEST_F(FetchLogic, CommandDeadlineEndsRetriesWithANetworkErrorNamingIt) {
  std::string a = "https://a.example";
  serve_release(a);
  transport.replies[a + "/" + rel.archive_name] = {{http(503), ""}};
  fetch::FetchOptions o = options({a});
  o.max_retries = 100;
  o.retry_base_ms = 1000;
  o.timeout_ms = 5000;
  transport.on_call = [this] { clock_ms += 700; };
  // Sleeping advances the clock too (sleep_ms is the fixture's; wrap it).
  fetch::FetchDeps deps;
  deps.transport = &transport;
  deps.sleep_ms = [this](long ms) {
    slept.push_back(ms);
    clock_ms += ms;
  };
  deps.verified_present = [](const std::filesystem::path&, const std::string&) { return false; };
  deps.install = [](const std::filesystem::path&, const std::filesystem::path&,
                    const std::string&) -> std::string {
    ADD_FAILURE() << "installed";
    return "";
  };
  deps.read_manifest = [this](const std::filesystem::path&) { return manifest; };
  deps.now_ms = [this] { return clock_ms; };
  try {
    fetch::fetch_targets_with(o, {"sm_90a"}, dir.path().string(), deps);
    FAIL() << "no deadline";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Network);
    std::string m = e.what();
    EXPECT_NE(m.find("passed its deadline of 5000 ms (--timeout"), std::string::npos) << m;
    EXPECT_NE(m.find(a + "/" + rel.archive_name + ": HTTP 503"), std::string::npos) << m;
  }
  // 700 ms per request, 1000/2000/... backoff: the 5 s are gone after a handful of attempts,
  // and no sleep reaches past the deadline.
  EXPECT_LE(transport.calls[a + "/" + rel.archive_name], 4);
  long total = 0;
  for (long ms : slept) total += ms;
  EXPECT_LE(total, 5000);
  EXPECT_TRUE(store_files().empty());
}

TEST_F(FetchLogic, NonPositiveDeadlinesAreUsageErrorsNamingTheOption) {
  fetch::FetchOptions o = options({"https://a.example"});
  o.download_min_rate = 0;
  try {
    fetch(o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage);
    EXPECT_NE(std::string(e.what()).find("--min-rate"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(transport.calls.empty());
}

// --- redirects (issue 12, item 8) -------------------------------------------------------------

TEST(RedirectRule, HttpsOnlyToHttpsAndHttpOnlyWithinItsHost) {
  using transport::redirect_refusal;
  EXPECT_EQ(redirect_refusal("https://m.example/r/i.json", "https://cdn.example/x"), "");
  EXPECT_EQ(redirect_refusal("http://m.example/r/i.json", "https://m.example/r/i.json"), "");
  EXPECT_EQ(redirect_refusal("http://m.example:8080/a", "http://M.EXAMPLE/b"), "");
  std::string down = redirect_refusal("https://m.example/a", "http://m.example/a");
  EXPECT_NE(down.find("from https to http"), std::string::npos) << down;
  std::string away = redirect_refusal("http://127.0.0.1:80/a", "http://localhost:80/a");
  EXPECT_NE(away.find("to another host localhost"), std::string::npos) << away;
  EXPECT_NE(redirect_refusal("http://m.example/a", "https://evil.example/a"), "");
  EXPECT_NE(redirect_refusal("http://m.example/a", "file:///etc/passwd"), "");
  EXPECT_NE(redirect_refusal("file:///srv/a", "file:///srv/b"), "");
}

// The kind is decided from what each failure was (MirrorFailure::bad_bytes), not from its words:
// a TLS failure whose text says "distrusted" is still a mirror that did not serve (Network),
// and a digest mismatch is Integrity, with the archive and target as fields.
TEST_F(FetchLogic, IntegrityOrNetworkIsDecidedFromTheFailureNotItsWording) {
  std::string a = "https://a.example";
  transport.serve(a + "/" + format::index_file_name("kiln-kernels", rel.version), rel.index_json);
  TransferResult tls = status(TransferStatus::Tls);
  tls.message = "SSL certificate problem: certificate is distrusted (failed verification)";
  transport.replies[a + "/" + rel.archive_name] = {{tls, ""}};
  try {
    fetch(options({a}));
    FAIL() << "fetch succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Network) << e.what();
    EXPECT_NE(std::string(e.what()).find("distrusted"), std::string::npos) << e.what();
  }
  transport::forget_bad_mirrors();
  std::string bad = rel.archive_bytes;
  bad[0] ^= 1;
  transport.serve(a + "/" + rel.archive_name, bad);
  try {
    fetch(options({a}));
    FAIL() << "fetch succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Integrity) << e.what();
    ASSERT_NE(e.field("file"), nullptr);
    EXPECT_EQ(*e.field("file"), rel.archive_name);
    ASSERT_NE(e.field("target"), nullptr);
    EXPECT_EQ(*e.field("target"), "sm_90a");
  }
  ASSERT_FALSE(transport.requests.empty());
}

// FetchOptions::ca_bundle reaches every request (fetch.cpp no longer reads KILN_CA_BUNDLE: its
// callers pass LoaderConfig::ca_bundle).
TEST_F(FetchLogic, TheCaBundleOfTheOptionsReachesEveryRequest) {
  std::string a = "https://a.example";
  serve_release(a);
  fetch::FetchOptions o = options({a});
  o.ca_bundle = "/etc/kiln/ca.pem";
  fetch(o);
  ASSERT_GE(transport.requests.size(), 2u);
  for (const auto& r : transport.requests) EXPECT_EQ(r.ca_bundle, "/etc/kiln/ca.pem") << r.url;
}

// --- the trust anchor rule (tuf_mirror.hpp) --------------------------------------------------

using fetch::choose_trust_anchor;
using fetch::TrustAnchor;

const std::string kPin(64, 'a');

TEST(TrustAnchor, AConfiguredRootOrPinIsTakenAsGiven) {
  fetch::FetchOptions o;
  o.tuf_root = "/etc/kiln/root.json";
  o.installed_tuf_root = "/opt/kiln/share/kiln/tuf/root.json";
  TrustAnchor a = choose_trust_anchor(o, kPin, true, "0.1.0");
  EXPECT_EQ(a.kind, TrustAnchor::Kind::TufRoot);
  EXPECT_EQ(a.value, "/etc/kiln/root.json");
  EXPECT_EQ(a.source, "--tuf-root / KILN_TUF_ROOT");
  // A configured pin beats an installed root: configuration wins over what was installed.
  fetch::FetchOptions p;
  p.index_sha256 = std::string(64, 'B');
  p.installed_tuf_root = o.installed_tuf_root;
  a = choose_trust_anchor(p, "", true, "0.1.0");
  EXPECT_EQ(a.kind, TrustAnchor::Kind::IndexPin);
  EXPECT_EQ(a.value, std::string(64, 'b'));
}

TEST(TrustAnchor, BothConfiguredIsAUsageErrorNamingBothAndNothingIsGuessed) {
  fetch::FetchOptions o;
  o.tuf_root = "/etc/kiln/root.json";
  o.index_sha256 = kPin;
  std::string m =
      test::error_of(ErrorKind::Usage, [&] { choose_trust_anchor(o, "", false, "0.1.0"); });
  EXPECT_NE(m.find("two trust anchors"), std::string::npos) << m;
  EXPECT_NE(m.find("/etc/kiln/root.json"), std::string::npos) << m;
  EXPECT_NE(m.find(kPin), std::string::npos) << m;
  EXPECT_NE(m.find("unset one"), std::string::npos) << m;
}

TEST(TrustAnchor, WithNothingConfiguredTheInstalledRootThenTheCompiledPinThenARefusal) {
  fetch::FetchOptions o;
  o.installed_tuf_root = "/opt/kiln/share/kiln/tuf/root.json";
  TrustAnchor a = choose_trust_anchor(o, kPin, true, "0.1.0");
  EXPECT_EQ(a.kind, TrustAnchor::Kind::TufRoot);
  EXPECT_EQ(a.value, o.installed_tuf_root);
  EXPECT_EQ(a.source, "the root installed beside libkiln or bin/kiln (share/kiln/tuf/root.json)");
  a = choose_trust_anchor(o, kPin, false, "0.1.0");  // not there after all
  EXPECT_EQ(a.kind, TrustAnchor::Kind::IndexPin);
  EXPECT_EQ(a.source, "built in (-DKILN_TRUSTED_INDEX_SHA256)");
  std::string m =
      test::error_of(ErrorKind::Usage, [&] { choose_trust_anchor(o, "", false, "0.1.0"); });
  EXPECT_NE(m.find("no trust anchor for the index of release 0.1.0"), std::string::npos) << m;
  EXPECT_NE(m.find("--tuf-root FILE"), std::string::npos) << m;
  EXPECT_NE(m.find("--index-sha256 HEX"), std::string::npos) << m;
  EXPECT_NE(m.find(o.installed_tuf_root), std::string::npos) << m;
  EXPECT_NE(m.find("kiln never trusts an unpinned index"), std::string::npos) << m;
  fetch::FetchOptions bad;
  bad.index_sha256 = "abc";
  test::error_of(ErrorKind::Usage, [&] { choose_trust_anchor(bad, "", false, "0.1.0"); });
}

// -DKILN_TRUSTED_TUF_ROOT=FILE: after a configured anchor and an installed root, before the
// compiled pin; written once into the metadata directory so the rest reads a file.
TEST(TrustAnchor, ACompiledRootComesAfterAnInstalledOneAndIsWrittenOnceAsAFile) {
  const std::string root = "{\"signed\": {\"_type\": \"root\"}, \"signatures\": []}";
  fetch::FetchOptions o;
  o.installed_tuf_root = "/opt/kiln/share/kiln/tuf/root.json";
  TrustAnchor a = choose_trust_anchor(o, kPin, false, "kiln-kernels 0.1.0", root);
  EXPECT_EQ(a.kind, TrustAnchor::Kind::TufRoot);
  EXPECT_EQ(a.source, "the root compiled in (-DKILN_TRUSTED_TUF_ROOT)");
  EXPECT_EQ(fetch::read_anchor_root(a), root);
  EXPECT_EQ(choose_trust_anchor(o, kPin, true, "kiln-kernels 0.1.0", root).value,
            o.installed_tuf_root);  // an installed root comes first
  fetch::FetchOptions pinned;
  pinned.index_sha256 = std::string(64, 'b');
  EXPECT_EQ(choose_trust_anchor(pinned, "", false, "kiln-kernels 0.1.0", root).kind,
            TrustAnchor::Kind::IndexPin);  // what the caller configured comes first
  EXPECT_EQ(choose_trust_anchor(fetch::FetchOptions{}, kPin, false, "kiln-kernels 0.1.0", "").kind,
            TrustAnchor::Kind::IndexPin);  // none compiled in: the compiled pin

  test::TempDir dir;
  std::string md = (dir / "tuf").string();
  EXPECT_EQ(test::error_of(ErrorKind::Usage, [&] { fetch::materialize_anchor(a, ""); })
                .find("metadata directory"),
            std::string("the compiled-in TUF root needs a ").size());
  fetch::materialize_anchor(a, md);
  EXPECT_EQ(a.value, (dir / "tuf" / ("compiled-root-" + io::sha256_hex(root) + ".json")).string());
  EXPECT_EQ(test::read_file(a.value), root);
  auto before = std::filesystem::last_write_time(a.value);
  TrustAnchor again = choose_trust_anchor(o, kPin, false, "kiln-kernels 0.1.0", root);
  fetch::materialize_anchor(again, md);
  EXPECT_EQ(again.value, a.value);
  EXPECT_EQ(std::filesystem::last_write_time(a.value), before);  // written once
  // The build's own: empty unless configured with -DKILN_TRUSTED_TUF_ROOT.
  EXPECT_TRUE(fetch::compiled_tuf_root().empty());
}

TEST(TufMirrorLayout, MetadataIsKeptPerRootAndTargetsAreFetchedByTheirHashName) {
  EXPECT_EQ(fetch::tuf_metadata_dir("/c/tuf", "root bytes"),
            std::filesystem::path("/c/tuf") / io::sha256_hex("root bytes"));
  tuf::TargetFile t;
  t.path = "kiln-kernels-0.1.0-index.json";
  t.length = 10;
  t.hashes = {{"sha256", std::string(64, '1')}, {"sha512", std::string(128, '2')}};
  EXPECT_EQ(fetch::tuf_target_url("http://m", t, true),
            "http://m/targets/" + std::string(64, '1') + ".kiln-kernels-0.1.0-index.json");
  EXPECT_EQ(fetch::tuf_target_url("http://m", t, false),
            "http://m/targets/kiln-kernels-0.1.0-index.json");
  fetch::DownloadExpect e = fetch::tuf_download_expect(t);
  EXPECT_EQ(e.sha256, std::string(64, '1'));
  EXPECT_EQ(e.exact_size, 10u);
  EXPECT_EQ(e.other_hashes,
            (std::map<std::string, std::string>{{"sha512", std::string(128, '2')}}));
  t.hashes = {{"sha512", std::string(128, '2')}};
  try {
    fetch::tuf_download_expect(t);
    FAIL() << "a target without sha256 was accepted";
  } catch (const tuf::Error& err) {
    EXPECT_EQ(err.attack(), tuf::Attack::Malformed);
  }
}

// A refusal under TUF names its attack in the error's fields; a plain kiln::Error copy keeps it.
TEST(TufMirrorLayout, ATufErrorCarriesItsAttackAsAField) {
  tuf::Error e(tuf::Attack::Rollback,
               "timestamp.json: field \"version\" is 1, trusted version is 2");
  Error copy = e.with("mirror", "http://m");
  ASSERT_NE(copy.field("attack"), nullptr);
  EXPECT_EQ(*copy.field("attack"), "rollback");
  EXPECT_EQ(copy.kind(), ErrorKind::Integrity);
  EXPECT_EQ(std::string(tuf::attack_id(tuf::Attack::Expired)), "freeze");
  EXPECT_EQ(std::string(tuf::attack_id(tuf::Attack::TooLarge)), "endless-data");
}

}  // namespace
}  // namespace kiln
