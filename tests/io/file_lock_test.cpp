#include "io/file_lock.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "kiln/error.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

using namespace std::chrono_literals;
using test::TempDir;

TEST(FileLock, SecondHolderTimesOutWithIoErrorNamingLockPathAndHolder) {
  TempDir dir;
  auto path = dir / "cache.lock";
  io::FileLock first = io::FileLock::acquire(path, 1s);
  auto start = std::chrono::steady_clock::now();
  try {
    // A second open file description conflicts with the first, as another process would.
    io::FileLock second = io::FileLock::acquire(path, 200ms);
    FAIL() << "second acquire succeeded while the lock was held";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    std::string m = e.what();
    EXPECT_NE(m.find(path.string()), std::string::npos) << m;
    EXPECT_NE(m.find("timed out after 200 ms"), std::string::npos) << m;
    EXPECT_NE(m.find("pid " + std::to_string(getpid())), std::string::npos) << m;
  }
  EXPECT_GE(std::chrono::steady_clock::now() - start, 200ms);
}

TEST(FileLock, ReleasedLockIsFreeAgainAndTheFileStays) {
  TempDir dir;
  auto path = dir / "x.lock";
  {
    io::FileLock lock = io::FileLock::acquire(path, 1s);
    EXPECT_TRUE(lock.held());
    EXPECT_FALSE(io::FileLock::try_acquire(path).has_value());
  }
  auto again = io::FileLock::try_acquire(path);
  ASSERT_TRUE(again.has_value());
  EXPECT_TRUE(again->held());
  EXPECT_TRUE(std::filesystem::exists(path));
}

TEST(FileLock, WaiterGetsTheLockWhenTheHolderReleasesIt) {
  TempDir dir;
  auto path = dir / "x.lock";
  auto holder = std::make_unique<io::FileLock>(io::FileLock::acquire(path, 1s));
  std::thread releaser([&] {
    std::this_thread::sleep_for(150ms);
    holder->release();
  });
  auto start = std::chrono::steady_clock::now();
  io::FileLock mine = io::FileLock::acquire(path, 10s);
  auto waited = std::chrono::steady_clock::now() - start;
  releaser.join();
  EXPECT_TRUE(mine.held());
  EXPECT_GE(waited, 100ms);
  EXPECT_LT(waited, 5s);
}

TEST(FileLock, LockOfAKilledProcessDoesNotBlock) {
  TempDir dir;
  auto path = dir / "x.lock";
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    io::FileLock lock = io::FileLock::acquire(path, 1s);
    char c = 'L';
    if (write(ready[1], &c, 1) != 1) _exit(1);
    for (;;) pause();
  }
  close(ready[1]);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  EXPECT_FALSE(io::FileLock::try_acquire(path).has_value()) << "the child holds it";
  EXPECT_EQ(
      test::read_file(path), "pid " + std::to_string(child) + " host " + [] {
        char h[256] = {};
        gethostname(h, sizeof h - 1);
        return std::string(h);
      }() + "\n");

  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  auto start = std::chrono::steady_clock::now();
  io::FileLock mine = io::FileLock::acquire(path, 2s);
  EXPECT_TRUE(mine.held());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
}

// A mirror or a TUF repository is locked on the directory itself: nothing is added to what it
// serves, and a second holder waits as for a lock file.
TEST(FileLock, ADirectoryIsLockedOnItselfWithNoFileInIt) {
  TempDir dir;
  io::FileLock held = io::FileLock::acquire_directory(dir.path(), 1s);
  EXPECT_TRUE(held.held());
  try {
    io::FileLock::acquire_directory(dir.path(), 50ms);
    ADD_FAILURE() << "a second holder got the lock";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_NE(std::string(e.what()).find(dir.path().string()), std::string::npos) << e.what();
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  held.release();
  EXPECT_TRUE(io::FileLock::acquire_directory(dir.path(), 1s).held());
}

TEST(FileLock, LockInMissingDirectoryIsIoErrorNamingThePath) {
  TempDir dir;
  auto path = dir / "no" / "such" / "x.lock";
  try {
    io::FileLock::acquire(path, 100ms);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln
