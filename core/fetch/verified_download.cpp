// The one retry loop and the one verified download (verified_download.hpp).
#include "fetch/verified_download.hpp"

#include <algorithm>
#include <exception>
#include <memory>
#include <functional>
#include <optional>
#include <string_view>

#include "io/atomic_file.hpp"
#include "io/sha256.hpp"
#include "tuf/tuf_metadata.hpp"

namespace kiln::fetch {

std::string describe(const transport::TransferResult& r) {
  if (r.status == transport::TransferStatus::Http) return "HTTP " + std::to_string(r.http_status);
  return std::string(to_string(r.status)) + (r.message.empty() ? "" : ": " + r.message);
}

transport::TransferResult get_with_retries(const RetryLoop& loop,
                                const std::function<transport::TransferRequest()>& request,
                                const std::function<void()>& reset, const transport::Sink& sink) {
  for (int n = 1;; ++n) {
    if (reset) reset();
    transport::TransferResult r = loop.transport->get(request(), sink);
    if (r.status == transport::TransferStatus::Ok || r.status == transport::TransferStatus::Aborted) return r;
    transport::RetryDecision d = transport::decide_retry(r, n, loop.policy);
    // The file's time on this mirror would be gone before the next attempt starts: ask the
    // next mirror now instead of sleeping into the deadline.
    if (d.retry && loop.file_budget_ms && loop.file_budget_ms() <= d.delay_ms) {
      d.retry = false;
      d.reason = "its time on this mirror is spent";
    }
    if (loop.on_failure) loop.on_failure(r, d, n);
    if (!d.retry) return r;
    long delay = d.delay_ms;
    if (loop.remaining_ms) delay = std::min(delay, loop.remaining_ms());
    if (loop.sleep_ms) loop.sleep_ms(delay);
  }
}

namespace {

// Where a download's bytes go while they arrive: a temp file renamed onto its destination
// (download_verified), or memory (download_verified_to_memory). One state machine serves both.
struct DownloadSink {
  std::function<void()> start;                   // a fresh attempt: drop what the last one kept
  std::function<void(std::string_view)> write;   // may throw (the temp file could not be written)
  std::function<void()> commit;                  // the bytes verified: keep them
};

DownloadResult download_with(const RetryLoop& loop,
                             const std::function<transport::TransferRequest()>& request,
                             const std::string& name, const DownloadExpect& expect,
                             const DownloadSink& into) {
  const std::uint64_t cap = expect.exact_size ? *expect.exact_size : expect.max_bytes;
  DownloadResult out;
  std::optional<io::Sha256> hash;
  std::unique_ptr<tuf::MultiHasher> others;
  bool too_big = false;
  auto reset = [&] {
    into.start();
    hash.emplace();
    if (!expect.other_hashes.empty())
      others = std::make_unique<tuf::MultiHasher>(expect.other_hashes, name);
    out.bytes = 0;
    out.write_error.clear();
    too_big = false;
    ++out.attempts;
  };
  auto sink = [&](const char* data, std::size_t len) {
    if (out.bytes + len > cap) return !(too_big = true);
    try {
      into.write(std::string_view(data, len));
    } catch (const std::exception& e) {
      out.write_error = e.what();
      return false;
    }
    hash->update(data, len);
    if (others) others->update(std::string_view(data, len));
    out.bytes += len;
    if (loop.on_bytes) loop.on_bytes(out.bytes);
    return true;
  };
  out.transfer = get_with_retries(loop, request, reset, sink);
  if (too_big) {
    out.status = DownloadStatus::TooBig;
  } else if (!out.write_error.empty()) {
    out.status = DownloadStatus::WriteFailed;
  } else if (out.transfer.status != transport::TransferStatus::Ok) {
    out.status = DownloadStatus::TransferFailed;
  } else {
    out.sha256 = hash->hex();
    if (others)
      for (const auto& [alg, got] : others->finish())
        if (got != expect.other_hashes.at(alg) && out.other_mismatch.empty())
          out.other_mismatch = alg + " is " + got + ", expected " + expect.other_hashes.at(alg);
    if (expect.exact_size && out.bytes != *expect.exact_size) {
      out.status = DownloadStatus::SizeMismatch;
    } else if (out.sha256 != expect.sha256) {
      out.other_mismatch.clear();  // the SHA-256 is the mismatch to report
      out.status = DownloadStatus::DigestMismatch;
    } else if (!out.other_mismatch.empty()) {
      out.status = DownloadStatus::DigestMismatch;
    } else {
      into.commit();
      out.status = DownloadStatus::Verified;
    }
  }
  return out;
}

}  // namespace

DownloadResult download_verified(const RetryLoop& loop,
                                 const std::function<transport::TransferRequest()>& request,
                                 const std::filesystem::path& dest, const DownloadExpect& expect) {
  std::optional<io::AtomicFile> tmp;
  DownloadSink into{[&] {
                      tmp.reset();  // removes the previous attempt's temp file
                      tmp.emplace(dest);
                    },
                    [&](std::string_view d) { tmp->write(d); }, [&] { tmp->commit(); }};
  return download_with(loop, request, dest.filename().string(), expect, into);
  // tmp's destructor removes an uncommitted temp file
}

DownloadResult download_verified_to_memory(const RetryLoop& loop,
                                           const std::function<transport::TransferRequest()>& request,
                                           const std::string& name, const DownloadExpect& expect,
                                           std::string& bytes) {
  std::string pending;
  DownloadSink into{[&] { pending.clear(); }, [&](std::string_view d) { pending.append(d); },
                    [&] { bytes = std::move(pending); }};
  return download_with(loop, request, name, expect, into);
}

}  // namespace kiln::fetch
