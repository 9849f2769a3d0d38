#include "io/file_descriptor.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "test_util.hpp"

namespace kiln {
namespace {

bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

TEST(UniqueFd, ClosesWhatItOwnsWhenDestroyedAndNothingItGaveUp) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  { io::UniqueFd owned(fds[0]); }
  EXPECT_FALSE(is_open(fds[0]));
  int kept = -1;
  {
    io::UniqueFd given_up(fds[1]);
    kept = given_up.release();
    EXPECT_FALSE(given_up);
  }
  EXPECT_TRUE(is_open(kept));
  ::close(kept);
}

TEST(UniqueFd, AMoveHandsOverTheOneDescriptorAndCloseReportsItsResult) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  io::UniqueFd a(fds[0]);
  io::UniqueFd b(std::move(a));
  EXPECT_FALSE(a);
  EXPECT_EQ(b.get(), fds[0]);
  io::UniqueFd c(fds[1]);
  c = std::move(b);  // c's pipe end is closed, fds[0] moves in
  EXPECT_FALSE(is_open(fds[1]));
  EXPECT_EQ(c.close(), 0);
  EXPECT_FALSE(is_open(fds[0]));
  EXPECT_EQ(c.close(), 0);  // nothing held: nothing to report
}

// A pipe hands over what was written so far: a reader asking for more gets a short read.
TEST(ReadFull, ReadsAcrossShortReadsUntilTheSizeAndStopsAtTheEnd) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  io::UniqueFd in(fds[0]), out(fds[1]);
  std::thread writer([&] {
    ASSERT_TRUE(io::write_all(out.get(), "abc"));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_TRUE(io::write_all(out.get(), "defgh"));
    out.reset();
  });
  std::string buf(6, '\0');
  EXPECT_EQ(io::read_full(in.get(), buf.data(), buf.size()), 6);
  EXPECT_EQ(buf, "abcdef");
  std::string rest(10, '\0');
  EXPECT_EQ(io::read_full(in.get(), rest.data(), rest.size()), 2);  // the end came first
  EXPECT_EQ(rest.substr(0, 2), "gh");
  writer.join();
}

TEST(ReadFull, AFailedReadIsMinusOneWithErrno) {
  char c;
  errno = 0;
  EXPECT_EQ(io::read_full(-1, &c, 1), -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_FALSE(io::write_all(-1, "x"));
  EXPECT_EQ(errno, EBADF);
}

TEST(PreadFull, ReadsFromTheOffsetAndLeavesThePositionAlone) {
  test::TempDir dir;
  test::write_file(dir / "f", "0123456789");
  io::UniqueFd fd(::open((dir / "f").c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(fd);
  std::string buf(4, '\0');
  EXPECT_EQ(io::pread_full(fd.get(), buf.data(), buf.size(), 3), 4);
  EXPECT_EQ(buf, "3456");
  EXPECT_EQ(io::pread_full(fd.get(), buf.data(), buf.size(), 8), 2);  // the end of the file
  char first = 0;
  EXPECT_EQ(io::read_some(fd.get(), &first, 1), 1);
  EXPECT_EQ(first, '0');
}

}  // namespace
}  // namespace kiln
