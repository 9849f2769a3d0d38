#pragma once
// The one verified download and the one retry loop. `kiln fetch` and the loader's mirror tier
// (fetch.cpp) and `kiln mirror sync` (packager/mirror/mirror_sync.cpp) all download through these, so they
// retry the same failures after the same delays (decide_retry: Retry-After honoured, capped; a
// request past its deadline is never retried) and keep nothing they have not verified.
//
// The state machine of one verified download (download_verified):
//
//   attempt n: a fresh <dest>.tmp.<rand> (AtomicFile, same directory), the body streamed into
//   it while being hashed
//     more bytes than expected (the exact size, else max_bytes) -> transfer aborted: TooBig
//     writing the temp file failed                              -> transfer aborted: WriteFailed
//     transfer failed -> on_failure(result, decide_retry(), n), which may throw (a passed
//                        deadline, the caller's own error); then sleep the delay (capped by
//                        remaining_ms) and attempt n+1, or TransferFailed when not retried
//     transfer complete: length != exact size                   -> SizeMismatch
//                        SHA-256 (or another digest asked) != expected -> DigestMismatch
//                        both match -> rename onto <dest>       -> Verified
//   anything but Verified removes the temp file: a failed download leaves no trace.
//
// The caller decides what a status means to it (fetch: distrust the mirror and ask the next;
// sync: stop, naming the file, the URL and both values): these functions throw only what the
// callbacks and AtomicFile throw (Error{Io} when the temp file cannot be created or renamed).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "transport/http_transport.hpp"

namespace kiln::fetch {

// How to repeat a request: the transport, the policy, and the hooks the caller owns.
struct RetryLoop {
  transport::Transport* transport = nullptr;
  transport::RetryPolicy policy;
  std::function<void(long ms)> sleep_ms;
  // After each failed attempt (neither Ok nor stopped by the sink), with decide_retry's answer
  // and the attempt's number (1 for the first). May throw to end the loop. Empty: nothing.
  std::function<void(const transport::TransferResult&, const transport::RetryDecision&, int attempt)> on_failure;
  // What is left of a whole-command deadline: caps every backoff sleep. Empty: no cap.
  std::function<long()> remaining_ms;
  // What is left of this file's time on this mirror (download_deadline_ms, a file only a bound
  // limits): a retry whose backoff would use it all is not made. Empty: no budget.
  std::function<long()> file_budget_ms;
  // download_verified: after each piece of the body is written and hashed, the bytes of this
  // attempt so far (a retry starts again from 0). Empty: nothing.
  std::function<void(std::uint64_t received)> on_bytes;
};

// GETs with retries. `request` builds each attempt's request (so its deadline is recomputed),
// `reset` runs before each attempt (the sink starts over). Returns the last attempt's result:
// Ok, Aborted (the sink stopped it: the caller knows why), or a failure not to be retried.
transport::TransferResult get_with_retries(const RetryLoop& loop,
                                const std::function<transport::TransferRequest()>& request,
                                const std::function<void()>& reset, const transport::Sink& sink);

// What the downloaded bytes must be.
struct DownloadExpect {
  DownloadExpect() = default;
  DownloadExpect(std::string sha, std::optional<std::uint64_t> exact, std::uint64_t max,
                 std::map<std::string, std::string> others = {})
      : sha256(std::move(sha)),
        exact_size(exact),
        max_bytes(max),
        other_hashes(std::move(others)) {}
  std::string sha256;                       // lowercase hex
  std::optional<std::uint64_t> exact_size;  // known length (an index entry): one byte more aborts
  std::uint64_t max_bytes = 0;              // without exact_size: the most accepted
  // Further digests the bytes must have, computed while streaming: TUF algorithm name ->
  // lowercase hex (a TUF target's sha512). Empty for pinned index entries.
  std::map<std::string, std::string> other_hashes;
};

enum class DownloadStatus {
  Verified,        // renamed onto dest (in memory: moved into `bytes`)
  TransferFailed,  // transfer: the last failure, not retried (or no retries left)
  TooBig,          // more than exact_size / max_bytes: aborted at the first byte over
  WriteFailed,     // write_error: the temp file could not be written
  SizeMismatch,    // complete, but `bytes` differs from exact_size
  DigestMismatch,  // complete, `sha256` differs from the expected digest
};

struct DownloadResult {
  DownloadStatus status = DownloadStatus::TransferFailed;
  transport::TransferResult transfer;  // the last attempt's
  std::uint64_t bytes = 0;  // received by the last attempt
  std::string sha256;       // of those bytes, when the transfer completed
  // DigestMismatch on one of other_hashes (sha256 matched): "sha512 is <got>, expected <want>".
  std::string other_mismatch;
  std::string write_error;  // WriteFailed: what the write said
  int attempts = 0;
};

// Downloads into `dest` through a temp file beside it, hashing while streaming; renames onto
// `dest` only when the length and the SHA-256 match `expect`. See the state machine above.
DownloadResult download_verified(const RetryLoop& loop,
                                 const std::function<transport::TransferRequest()>& request,
                                 const std::filesystem::path& dest, const DownloadExpect& expect);

// The same download kept in memory: on Verified, `bytes` holds them; otherwise it is left as it
// was. Nothing touches the disk (the loader's mirror tier when its cache cannot be written).
// `name` names the file in a digest mismatch of other_hashes.
DownloadResult download_verified_to_memory(const RetryLoop& loop,
                                           const std::function<transport::TransferRequest()>& request,
                                           const std::string& name, const DownloadExpect& expect,
                                           std::string& bytes);

// One transfer result in a log line or an error: "HTTP 503", "connection failed: <detail>".
std::string describe(const transport::TransferResult& r);

}  // namespace kiln::fetch
