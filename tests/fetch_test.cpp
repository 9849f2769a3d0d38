// Unit tests of the fetch logic: the retry decision and the mirror/trust state machine over a
// fake transport (no sockets). Real servers are in tests/integration/fetch_test.cpp.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <set>

#include "fetch_internal.hpp"
#include "http_transport.hpp"
#include "kiln/error.hpp"
#include "kiln/fetch.hpp"
#include "kiln/manifest.hpp"
#include "kiln/sha256.hpp"
#include "kiln/version.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

using fetch_detail::decide_retry;
using fetch_detail::RetryPolicy;
using fetch_detail::TransferResult;
using fetch_detail::TransferStatus;

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
                 TransferStatus::Aborted, TransferStatus::Ok})
    EXPECT_FALSE(decide_retry(status(s), 1, p).retry) << to_string(s);
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
  EXPECT_EQ(fetch_detail::parse_retry_after_seconds(" 7\r\n"), 7);
  EXPECT_EQ(fetch_detail::parse_retry_after_seconds("0"), 0);
  EXPECT_FALSE(fetch_detail::parse_retry_after_seconds("-1"));
  EXPECT_FALSE(fetch_detail::parse_retry_after_seconds("soon"));
  EXPECT_FALSE(fetch_detail::parse_retry_after_seconds(""));
}

TEST(RetryAfter, HeaderLineGivesItsValueOnlyForThatHeaderInAnyCase) {
  EXPECT_EQ(fetch_detail::header_value("Retry-After: 7\r\n", "retry-after"), " 7\r\n");
  EXPECT_EQ(fetch_detail::header_value("RETRY-AFTER:soon", "retry-after"), "soon");
  EXPECT_FALSE(fetch_detail::header_value("Retry-After-Not: 7\r\n", "retry-after"));
  EXPECT_FALSE(fetch_detail::header_value("Content-Length: 7\r\n", "retry-after"));
  EXPECT_FALSE(fetch_detail::header_value("no colon here\r\n", "retry-after"));
}

TEST(RetryAfter, SecondsOrAnHttpDateCountedFromNow) {
  const std::time_t now = 1700000000;  // Tue, 14 Nov 2023 22:13:20 GMT
  EXPECT_EQ(fetch_detail::parse_retry_after(" 120\r\n", now), 120);
  EXPECT_EQ(fetch_detail::parse_retry_after(" Tue, 14 Nov 2023 22:14:20 GMT\r\n", now), 60);
  EXPECT_EQ(fetch_detail::parse_retry_after(" Mon, 13 Nov 2023 22:13:20 GMT\r\n", now), 0);
  EXPECT_FALSE(fetch_detail::parse_retry_after(" soon\r\n", now));
  EXPECT_FALSE(fetch_detail::parse_retry_after(" \r\n", now));
}

TEST(MirrorUrl, NormalisesTrailingSlashAndBarePathsAndRefusesOtherSchemes) {
  EXPECT_EQ(fetch_detail::normalise_mirror("https://m.example/rel/"), "https://m.example/rel");
  EXPECT_EQ(fetch_detail::normalise_mirror("/srv/rel"), "file:///srv/rel");
  try {
    fetch_detail::normalise_mirror("ftp://m.example/rel");
    FAIL() << "ftp accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage);
    EXPECT_NE(std::string(e.what()).find("ftp://m.example/rel"), std::string::npos);
  }
}

// A mirror set in memory: url -> scripted responses (the last one repeats).
class FakeTransport : public fetch_detail::Transport {
 public:
  struct Reply {
    TransferResult result;
    std::string body;
  };
  std::map<std::string, std::vector<Reply>> replies;
  std::map<std::string, int> calls;
  std::mutex mu;

  TransferResult get(const fetch_detail::TransferRequest& req,
                     const fetch_detail::Sink& sink) override {
    Reply r;
    {
      std::lock_guard<std::mutex> g(mu);
      int n = calls[req.url]++;
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

struct FakeRelease {
  std::string version = kiln::version();
  std::string archive_name;
  std::string archive_bytes = "pretend this is a tar.zst";
  std::string index_json;
  FakeRelease() {
    archive_name = archive_file_name(version, cuda_version(), "sm_90a");
    Index idx;
    idx.package_version = version;
    idx.cuda_version = cuda_version();
    idx.archives.push_back(
        {archive_name, "sm_90a", archive_bytes.size(), sha256_hex(archive_bytes)});
    index_json = index_to_json(idx);
  }
};

class FetchLogic : public ::testing::Test {
 protected:
  void SetUp() override { fetch_detail::forget_bad_mirrors(); }
  FetchResult fetch(FetchOptions opts) {
    fetch_detail::FetchDeps deps;
    deps.transport = &transport;
    deps.sleep_ms = [this](long ms) { slept.push_back(ms); };
    deps.verified_present = [this](const std::filesystem::path&, const std::string& stem) {
      return installed.count(stem) > 0;
    };
    deps.install = [this](const std::filesystem::path& archive, const std::filesystem::path& store,
                          const std::string& sha) {
      EXPECT_EQ(sha256_file(archive), sha);  // only verified bytes reach the installer
      std::string stem = archive.filename().string();
      stem = stem.substr(0, stem.size() - 8);
      installed.insert(stem);
      return (store / stem).string();
    };
    return fetch_detail::fetch_targets_with(opts, {"sm_90a"}, dir.path().string(), deps);
  }
  FetchOptions options(std::vector<std::string> mirrors) {
    FetchOptions o;
    o.mirrors = std::move(mirrors);
    o.index_sha256 = sha256_hex(rel.index_json);
    return o;
  }
  test::TempDir dir;
  FakeTransport transport;
  FakeRelease rel;
  std::vector<long> slept;
  std::set<std::string> installed;
};

TEST_F(FetchLogic, OfflineFailsAtOnceWithoutAnyTransferAndNamesTheCommand) {
  FetchOptions o = options({"https://a.example"});
  o.offline = true;
  try {
    fetch(o);
    FAIL() << "offline fetch succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::NotFound);
    EXPECT_NE(std::string(e.what()).find("kiln fetch --targets sm_90a"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(transport.calls.empty());
}

TEST_F(FetchLogic, CorruptFirstMirrorFallsBackAndIsNotAskedAgain) {
  std::string a = "https://a.example", b = "https://b.example";
  transport.serve(a + "/" + index_file_name(rel.version), rel.index_json);
  transport.serve(b + "/" + index_file_name(rel.version), rel.index_json);
  std::string bad = rel.archive_bytes;
  bad[3] ^= 1;
  transport.serve(a + "/" + rel.archive_name, bad);
  transport.serve(b + "/" + rel.archive_name, rel.archive_bytes);
  FetchResult r = fetch(options({a, b}));
  ASSERT_EQ(r.installed.size(), 1u);
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_EQ(r.failures[0].mirror, a);
  EXPECT_NE(r.failures[0].what.find("SHA-256 mismatch"), std::string::npos) << r.failures[0].what;
  EXPECT_TRUE(fetch_detail::is_mirror_bad(a));
  EXPECT_FALSE(fetch_detail::is_mirror_bad(b));
  // A second run in this process skips the distrusted mirror, even for the index.
  installed.clear();
  FetchResult r2 = fetch(options({a, b}));
  EXPECT_EQ(transport.calls[a + "/" + index_file_name(rel.version)], 1);
  EXPECT_EQ(transport.calls[a + "/" + rel.archive_name], 1);
  EXPECT_EQ(r2.installed.size(), 1u);
}

TEST_F(FetchLogic, IndexNotMatchingThePinIsRefusedNamingBothDigests) {
  std::string a = "https://a.example";
  std::string forged = rel.index_json + " ";
  transport.serve(a + "/" + index_file_name(rel.version), forged);
  try {
    fetch(options({a}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Integrity);
    std::string m = e.what();
    EXPECT_NE(m.find(sha256_hex(rel.index_json)), std::string::npos) << m;
    EXPECT_NE(m.find(sha256_hex(forged)), std::string::npos) << m;
    EXPECT_NE(m.find(a), std::string::npos) << m;
  }
}

TEST_F(FetchLogic, ServerErrorIsRetriedThenSucceeds) {
  std::string a = "https://a.example";
  transport.serve(a + "/" + index_file_name(rel.version), rel.index_json);
  transport.replies[a + "/" + rel.archive_name] = {{http(500), ""},
                                                   {status(TransferStatus::Ok), rel.archive_bytes}};
  FetchOptions o = options({a});
  o.retry_base_ms = 250;
  FetchResult r = fetch(o);
  EXPECT_EQ(r.installed.size(), 1u);
  EXPECT_EQ(slept, std::vector<long>{250});
  EXPECT_EQ(transport.calls[a + "/" + rel.archive_name], 2);
}

TEST_F(FetchLogic, NotFoundIsNotRetriedAndTheErrorNamesEveryMirror) {
  std::string a = "https://a.example", b = "http://b.example";
  transport.serve(a + "/" + index_file_name(rel.version), rel.index_json);
  try {
    fetch(options({a, b}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Network);
    std::string m = e.what();
    EXPECT_NE(m.find(a + "/" + rel.archive_name + ": HTTP 404"), std::string::npos) << m;
    EXPECT_NE(m.find(b), std::string::npos) << m;
  }
  EXPECT_EQ(transport.calls[a + "/" + rel.archive_name], 1);
  EXPECT_TRUE(slept.empty());
}

TEST_F(FetchLogic, NoPinnedDigestRefusesBeforeAnyTransfer) {
  FetchOptions o = options({"https://a.example"});
  o.index_sha256.clear();
  if (!default_index_sha256().empty()) GTEST_SKIP() << "this build has a compiled-in pin";
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
  installed.insert(archive_stem(rel.version, cuda_version(), "sm_90a"));
  FetchOptions o = options({"https://a.example"});
  FetchResult r = fetch(o);
  EXPECT_EQ(r.already_present.size(), 1u);
  EXPECT_TRUE(transport.calls.empty());
  o.offline = true;
  EXPECT_EQ(fetch(o).already_present.size(), 1u);
}

}  // namespace
}  // namespace kiln
