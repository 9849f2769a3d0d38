#pragma once
// An exclusive inter-process lock on a lock file (flock), with a timeout.
//
// Why flock: the kernel releases it when the holder dies (even on SIGKILL), so a crashed
// process never leaves a lock behind on local filesystems. Why a timeout anyway: on network
// filesystems a lock can be held by a hung or partitioned node; waiting forever hung fleets.
// The holder writes "pid <n> host <name>" into the file so a timeout can name who holds it.
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

namespace kiln::io {

class FileLock {
 public:
  // Blocks until the lock on `path` is held or `timeout` passes. Creates the file (not its
  // directory). Throws Error{Io} naming the path (and the holder, if known) on timeout or when
  // the file cannot be opened.
  static FileLock acquire(const std::filesystem::path& path, std::chrono::milliseconds timeout);
  // One attempt, no waiting: nullopt when another holder has it.
  static std::optional<FileLock> try_acquire(const std::filesystem::path& path);
  // The same lock on an existing directory itself (flock on its descriptor): nothing is created
  // in it, for a directory whose listing is its content (a mirror). No holder note: a timeout
  // names the directory only. Where the filesystem cannot flock a directory (NFS), the lock
  // returned is not held (held() false) rather than an error.
  static FileLock acquire_directory(const std::filesystem::path& dir,
                                    std::chrono::milliseconds timeout);

  FileLock() = default;
  ~FileLock();
  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  bool held() const { return fd_ >= 0; }
  const std::filesystem::path& path() const { return path_; }
  void release();  // idempotent; the lock file stays (removing it would race other waiters)

 private:
  static FileLock acquire_with(const std::filesystem::path& path, std::chrono::milliseconds timeout,
                               bool directory);

  int fd_ = -1;
  std::filesystem::path path_;
};

// Contents of a lock file as the holder wrote them ("pid 123 host node7"); "" if unreadable.
std::string describe_lock_holder(const std::filesystem::path& path);

}  // namespace kiln::io
