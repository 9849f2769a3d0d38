// The one verified download and retry loop (core/fetch/verified_download.hpp) over a scripted
// transport and a real temporary directory: what lands on disk, what is retried, how long it
// sleeps. kiln fetch, the mirror tier and kiln mirror sync all go through these; their own
// behaviour over real loopback servers is in tests/integration/{fetch,mirror_sync}_test.cpp.
#include "fetch/verified_download.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "test_util.hpp"
#include "tuf/tuf_metadata.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// One scripted answer: the body is handed to the sink in 3-byte pieces, then `status`.
struct Reply {
  transport::TransferStatus status = transport::TransferStatus::Ok;
  long http_status = 200;
  std::string body;
  std::optional<long> retry_after_s;
};

class ScriptedTransport : public transport::Transport {
 public:
  std::deque<Reply> replies;
  std::vector<transport::TransferRequest> requests;

  transport::TransferResult get(const transport::TransferRequest& req, const transport::Sink& sink) override {
    requests.push_back(req);
    if (replies.empty()) throw std::runtime_error("unscripted request for " + req.url);
    Reply r = replies.front();
    replies.pop_front();
    transport::TransferResult out;
    for (std::size_t i = 0; i < r.body.size(); i += 3) {
      std::string piece = r.body.substr(i, 3);
      if (!sink(piece.data(), piece.size())) {
        out.status = transport::TransferStatus::Aborted;
        return out;
      }
    }
    out.status = r.status;
    out.http_status = r.http_status;
    out.retry_after_s = r.retry_after_s;
    return out;
  }
};

Reply ok(std::string body) { return {transport::TransferStatus::Ok, 200, std::move(body), std::nullopt}; }
Reply http(long code, std::string body = "", std::optional<long> retry_after = std::nullopt) {
  return {transport::TransferStatus::Http, code, std::move(body), retry_after};
}

// The kind of the Error `fn` throws; fails the test when it returns or throws anything else.
template <typename Fn>
std::optional<ErrorKind> thrown_kind(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.kind();
  }
  return std::nullopt;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every file in `dir`, by name: what a failed download must not leave behind.
std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

class VerifiedDownload : public ::testing::Test {
 protected:
  void SetUp() override { loop.transport = &transport; }
  fetch::DownloadResult download(const fetch::DownloadExpect& expect) {
    return fetch::download_verified(
        loop,
        [] {
          transport::TransferRequest r;
          r.url = "http://127.0.0.1:1/a.tar.zst";
          return r;
        },
        dest, expect);
  }
  fetch::DownloadExpect expect_of(const std::string& bytes) {
    return {io::sha256_hex(bytes), bytes.size(), bytes.size()};
  }

  test::TempDir dir;
  fs::path dest = dir.path() / "a.tar.zst";
  ScriptedTransport transport;
  std::vector<long> sleeps;
  fetch::RetryLoop loop{nullptr, transport::RetryPolicy{3, 500, 30000}, [this](long ms) { sleeps.push_back(ms); },
                 nullptr, nullptr, nullptr, nullptr};
  const std::string body = "the pinned archive bytes";
};

TEST_F(VerifiedDownload, ServerErrorIsRetriedHonouringRetryAfterThenTheBytesAreRenamedIntoPlace) {
  transport.replies = {http(503, "", 2), ok(body)};
  fetch::DownloadResult r = download(expect_of(body));
  EXPECT_EQ(r.status, fetch::DownloadStatus::Verified);
  EXPECT_EQ(r.attempts, 2);
  EXPECT_EQ(sleeps, std::vector<long>{2000});
  EXPECT_EQ(slurp(dest), body);
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"a.tar.zst"});
}

TEST_F(VerifiedDownload, ARetryStartsAFreshTempFileSoACutShortFirstAttemptLeavesNothingBehind) {
  transport.replies = {{transport::TransferStatus::Connection, 0, body.substr(0, 7), std::nullopt}, ok(body)};
  fetch::DownloadResult r = download(expect_of(body));
  ASSERT_EQ(r.status, fetch::DownloadStatus::Verified);
  EXPECT_EQ(slurp(dest), body);  // not the first 7 bytes twice
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"a.tar.zst"});
}

TEST_F(VerifiedDownload, BytesAreReportedAsTheyArriveAndARetryCountsFromZeroAgain) {
  std::vector<std::uint64_t> seen;
  loop.on_bytes = [&](std::uint64_t n) { seen.push_back(n); };
  const std::string whole = "0123456";  // pieces of 3 bytes: 3, 6, 7
  transport.replies = {{transport::TransferStatus::Connection, 0, "0123", std::nullopt},
                       ok(whole)};
  fetch::DownloadResult r = download(expect_of(whole));
  ASSERT_EQ(r.status, fetch::DownloadStatus::Verified);
  EXPECT_EQ(seen, (std::vector<std::uint64_t>{3, 4, 3, 6, 7}));
}

TEST_F(VerifiedDownload, WrongDigestIsReportedWithWhatCameAndLeavesNoFile) {
  transport.replies = {ok("other bytes of the same length!!")};
  fetch::DownloadExpect e{io::sha256_hex(body), std::nullopt, 1000};
  fetch::DownloadResult r = download(e);
  EXPECT_EQ(r.status, fetch::DownloadStatus::DigestMismatch);
  EXPECT_EQ(r.sha256, io::sha256_hex("other bytes of the same length!!"));
  EXPECT_EQ(r.attempts, 1);  // bad bytes are not retried
  EXPECT_TRUE(names_in(dir.path()).empty());
}

TEST_F(VerifiedDownload, EveryOtherDigestAskedIsCheckedAndAMismatchKeepsNothing) {
  const std::string sha512 = *tuf::hex_digest("sha512", body);
  transport.replies = {ok(body)};
  fetch::DownloadExpect good = expect_of(body);
  good.other_hashes = {{"sha512", sha512}};
  EXPECT_EQ(download(good).status, fetch::DownloadStatus::Verified);
  fs::remove(dest);
  // The SHA-256 matches, the SHA-512 a TUF target lists does not: refused all the same.
  transport.replies = {ok(body)};
  fetch::DownloadExpect bad = expect_of(body);
  bad.other_hashes = {{"sha512", std::string(128, '0')}};
  fetch::DownloadResult r = download(bad);
  EXPECT_EQ(r.status, fetch::DownloadStatus::DigestMismatch);
  EXPECT_EQ(r.other_mismatch, "sha512 is " + sha512 + ", expected " + std::string(128, '0'));
  EXPECT_TRUE(names_in(dir.path()).empty());
}

TEST_F(VerifiedDownload, OneByteMoreThanTheExactSizeAbortsTheTransferWithoutRetry) {
  transport.replies = {ok(body + "!"), ok(body)};
  fetch::DownloadResult r = download(expect_of(body));
  EXPECT_EQ(r.status, fetch::DownloadStatus::TooBig);
  EXPECT_EQ(r.transfer.status, transport::TransferStatus::Aborted);
  EXPECT_EQ(transport.requests.size(), 1u);
  EXPECT_TRUE(names_in(dir.path()).empty());
}

TEST_F(VerifiedDownload, ACapWithoutAnExactSizeAbortsAboveIt) {
  transport.replies = {ok(body)};
  fetch::DownloadExpect e{io::sha256_hex(body), std::nullopt, body.size() - 1};
  EXPECT_EQ(download(e).status, fetch::DownloadStatus::TooBig);
  EXPECT_TRUE(names_in(dir.path()).empty());
}

TEST_F(VerifiedDownload, ShortBodyIsASizeMismatchNamingTheLengthThatCame) {
  transport.replies = {ok(body.substr(0, 10))};
  fetch::DownloadResult r = download(expect_of(body));
  EXPECT_EQ(r.status, fetch::DownloadStatus::SizeMismatch);
  EXPECT_EQ(r.bytes, 10u);
  EXPECT_TRUE(names_in(dir.path()).empty());
}

TEST_F(VerifiedDownload, NotFoundIsNotRetriedAndTheCallerHearsOfItOnce) {
  std::vector<std::pair<long, bool>> heard;
  loop.on_failure = [&](const transport::TransferResult& r, const transport::RetryDecision& d, int) {
    heard.push_back({r.http_status, d.retry});
  };
  transport.replies = {http(404)};
  fetch::DownloadResult r = download(expect_of(body));
  EXPECT_EQ(r.status, fetch::DownloadStatus::TransferFailed);
  EXPECT_EQ(r.transfer.http_status, 404);
  EXPECT_EQ(heard, (std::vector<std::pair<long, bool>>{{404, false}}));
  EXPECT_TRUE(sleeps.empty());
  EXPECT_TRUE(names_in(dir.path()).empty());
}

TEST_F(VerifiedDownload, RetriesStopAfterThePolicysLimitWithGrowingBackoff) {
  loop.policy = transport::RetryPolicy{2, 100, 10000};
  transport.replies = {http(500), http(502), http(500), ok(body)};
  fetch::DownloadResult r = download(expect_of(body));
  EXPECT_EQ(r.status, fetch::DownloadStatus::TransferFailed);
  EXPECT_EQ(r.attempts, 3);
  EXPECT_EQ(sleeps, (std::vector<long>{100, 200}));
  EXPECT_EQ(transport.replies.size(), 1u);  // the fourth answer was never asked for
}

TEST_F(VerifiedDownload, BackoffSleepIsCappedByWhatIsLeftOfTheCommandDeadline) {
  loop.remaining_ms = [] { return 40L; };
  transport.replies = {http(429, "", 3600), ok(body)};
  EXPECT_EQ(download(expect_of(body)).status, fetch::DownloadStatus::Verified);
  EXPECT_EQ(sleeps, std::vector<long>{40});
}

TEST_F(VerifiedDownload, ACallerThatEndsTheLoopStopsItAndNothingIsKept) {
  loop.on_failure = [](const transport::TransferResult&, const transport::RetryDecision&, int) {
    throw Error(ErrorKind::Network, "deadline passed");
  };
  transport.replies = {http(503, body.substr(0, 5)), ok(body)};
  EXPECT_EQ(thrown_kind([&] { download(expect_of(body)); }), ErrorKind::Network);
  EXPECT_EQ(transport.requests.size(), 1u);
  EXPECT_TRUE(names_in(dir.path()).empty());
}

TEST_F(VerifiedDownload, UnwritableDestinationIsAnIoError) {
  transport.replies = {ok(body)};
  dest = dir.path() / "missing-dir" / "a.tar.zst";
  EXPECT_EQ(thrown_kind([&] { download(expect_of(body)); }), ErrorKind::Io);
}

TEST(RetryLoopGet, EachAttemptRebuildsItsRequestAndResetsTheSink) {
  ScriptedTransport transport;
  transport.replies = {http(500, "partial"), ok("whole")};
  std::vector<long> sleeps;
  fetch::RetryLoop loop{&transport, transport::RetryPolicy{3, 10, 100}, [&](long ms) { sleeps.push_back(ms); },
                 nullptr, nullptr, nullptr, nullptr};
  int built = 0;
  std::string got;
  transport::TransferResult r = fetch::get_with_retries(
      loop,
      [&] {
        transport::TransferRequest q;
        q.url = "http://127.0.0.1:1/i" + std::to_string(++built);
        return q;
      },
      [&] { got.clear(); },
      [&](const char* d, std::size_t n) {
        got.append(d, n);
        return true;
      });
  EXPECT_EQ(r.status, transport::TransferStatus::Ok);
  EXPECT_EQ(got, "whole");
  ASSERT_EQ(transport.requests.size(), 2u);
  EXPECT_EQ(transport.requests[1].url, "http://127.0.0.1:1/i2");
  EXPECT_EQ(sleeps, std::vector<long>{10});
}

}  // namespace
}  // namespace kiln
