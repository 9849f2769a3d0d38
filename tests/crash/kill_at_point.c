// An LD_PRELOAD library that kills its process with SIGKILL at the Nth call that changes the file
// system (tests/crash/crash_points.sh; docs/decisions.md, "Crash points"). One counter for every
// thread of the process, kept in a shared file so that the harness reads how many points an
// unkilled run had. Only the process started with the library counts: it removes LD_PRELOAD from
// its environment, so nvcc, ninja or curl children are not counted or killed.
//
//   CRASH_POINT_COUNTER=<file>   8 bytes, the counter (created zero by the harness)
//   CRASH_POINT_AT=<N>           kill before the Nth point; 0 or unset: count only
//   CRASH_POINT_LOG=<file>       optional: one line per point ("<n> <call> <path>")
//
// A point is: write/pwrite/writev/copy_file_range/sendfile to a regular file, fsync, fdatasync,
// syncfs, rename(at,at2), mkdir(at), unlink(at), rmdir, remove, link(at), symlink(at), ftruncate,
// and open/openat/creat with O_CREAT. The call is not made: the process dies on its way in,
// between the previous call and this one.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static _Atomic uint64_t* counter;
static uint64_t kill_at;
static int log_fd = -1;

__attribute__((constructor)) static void crash_point_init(void) {
  const char* counter_path = getenv("CRASH_POINT_COUNTER");
  const char* at = getenv("CRASH_POINT_AT");
  const char* log_path = getenv("CRASH_POINT_LOG");
  unsetenv("LD_PRELOAD");
  if (counter_path == NULL) return;
  int fd = (int)syscall(SYS_openat, AT_FDCWD, counter_path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return;
  void* map = mmap(NULL, sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  syscall(SYS_close, fd);
  if (map == MAP_FAILED) return;
  counter = (_Atomic uint64_t*)map;
  kill_at = at != NULL ? strtoull(at, NULL, 10) : 0;
  if (log_path != NULL)
    log_fd = (int)syscall(SYS_openat, AT_FDCWD, log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                          0644);
}

static void point(const char* call, const char* path) {
  if (counter == NULL) return;
  uint64_t n = atomic_fetch_add(counter, 1) + 1;
  if (log_fd >= 0) {
    char line[4200];
    int len = snprintf(line, sizeof line, "%llu %s %s\n", (unsigned long long)n, call,
                       path != NULL ? path : "");
    if (len > (int)sizeof line - 1) len = (int)sizeof line - 1;
    syscall(SYS_write, log_fd, line, (size_t)len);
  }
  if (kill_at != 0 && n == kill_at) {
    syscall(SYS_kill, getpid(), SIGKILL);
    for (;;) pause();
  }
}

static const char* fd_path(int fd, char* buf, size_t size) {
  char link[64];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, buf, size - 1);
  buf[n > 0 ? n : 0] = '\0';
  return buf;
}

// Writes count only to regular files: a socket, a pipe or the terminal holds no state to tear.
static void fd_point(const char* call, int fd, int only_regular) {
  if (counter == NULL) return;
  if (only_regular) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return;
  }
  char buf[4096];
  point(call, log_fd >= 0 ? fd_path(fd, buf, sizeof buf) : NULL);
}

// The C library's own function, looked up once.
#define REAL(fn)                      \
  static __typeof__(fn)* real = NULL; \
  if (real == NULL) real = (__typeof__(fn)*)dlsym(RTLD_NEXT, #fn)

ssize_t write(int fd, const void* data, size_t n) {
  REAL(write);
  fd_point("write", fd, 1);
  return real(fd, data, n);
}
ssize_t pwrite(int fd, const void* data, size_t n, off_t off) {
  REAL(pwrite);
  fd_point("pwrite", fd, 1);
  return real(fd, data, n, off);
}
ssize_t pwrite64(int fd, const void* data, size_t n, off_t off) {
  REAL(pwrite64);
  fd_point("pwrite", fd, 1);
  return real(fd, data, n, off);
}
ssize_t writev(int fd, const struct iovec* iov, int count) {
  REAL(writev);
  fd_point("writev", fd, 1);
  return real(fd, iov, count);
}
// std::filesystem::copy_file copies with these (the kernel writes, not write()).
ssize_t copy_file_range(int in, off_t* in_off, int out, off_t* out_off, size_t n, unsigned flags) {
  REAL(copy_file_range);
  fd_point("copy_file_range", out, 1);
  return real(in, in_off, out, out_off, n, flags);
}
ssize_t sendfile(int out, int in, off_t* off, size_t n) {
  REAL(sendfile);
  fd_point("sendfile", out, 1);
  return real(out, in, off, n);
}
int fsync(int fd) {
  REAL(fsync);
  fd_point("fsync", fd, 0);
  return real(fd);
}
int fdatasync(int fd) {
  REAL(fdatasync);
  fd_point("fdatasync", fd, 0);
  return real(fd);
}
int syncfs(int fd) {
  REAL(syncfs);
  fd_point("syncfs", fd, 0);
  return real(fd);
}
int ftruncate(int fd, off_t len) {
  REAL(ftruncate);
  fd_point("ftruncate", fd, 0);
  return real(fd, len);
}
int ftruncate64(int fd, off_t len) {
  REAL(ftruncate64);
  fd_point("ftruncate", fd, 0);
  return real(fd, len);
}
int rename(const char* from, const char* to) {
  REAL(rename);
  point("rename", to);
  return real(from, to);
}
int renameat(int from_dir, const char* from, int to_dir, const char* to) {
  REAL(renameat);
  point("renameat", to);
  return real(from_dir, from, to_dir, to);
}
int renameat2(int from_dir, const char* from, int to_dir, const char* to, unsigned flags) {
  REAL(renameat2);
  point("renameat2", to);
  return real(from_dir, from, to_dir, to, flags);
}
int mkdir(const char* path, mode_t mode) {
  REAL(mkdir);
  point("mkdir", path);
  return real(path, mode);
}
int mkdirat(int dir, const char* path, mode_t mode) {
  REAL(mkdirat);
  point("mkdirat", path);
  return real(dir, path, mode);
}
int unlink(const char* path) {
  REAL(unlink);
  point("unlink", path);
  return real(path);
}
int unlinkat(int dir, const char* path, int flags) {
  REAL(unlinkat);
  point("unlinkat", path);
  return real(dir, path, flags);
}
int rmdir(const char* path) {
  REAL(rmdir);
  point("rmdir", path);
  return real(path);
}
int remove(const char* path) {
  REAL(remove);
  point("remove", path);
  return real(path);
}
int link(const char* from, const char* to) {
  REAL(link);
  point("link", to);
  return real(from, to);
}
int linkat(int from_dir, const char* from, int to_dir, const char* to, int flags) {
  REAL(linkat);
  point("linkat", to);
  return real(from_dir, from, to_dir, to, flags);
}
int symlink(const char* target, const char* path) {
  REAL(symlink);
  point("symlink", path);
  return real(target, path);
}
int symlinkat(const char* target, int dir, const char* path) {
  REAL(symlinkat);
  point("symlinkat", path);
  return real(target, dir, path);
}

// open/openat/creat count only when they may create the file.
#define OPEN_MODE(flags)                   \
  mode_t mode = 0;                         \
  if ((flags) & (O_CREAT | __O_TMPFILE)) { \
    va_list args;                          \
    va_start(args, flags);                 \
    mode = va_arg(args, mode_t);           \
    va_end(args);                          \
  }

int open(const char* path, int flags, ...) {
  REAL(open);
  OPEN_MODE(flags);
  if (flags & O_CREAT) point("open", path);
  return real(path, flags, mode);
}
int open64(const char* path, int flags, ...) {
  REAL(open64);
  OPEN_MODE(flags);
  if (flags & O_CREAT) point("open", path);
  return real(path, flags, mode);
}
int openat(int dir, const char* path, int flags, ...) {
  REAL(openat);
  OPEN_MODE(flags);
  if (flags & O_CREAT) point("openat", path);
  return real(dir, path, flags, mode);
}
int openat64(int dir, const char* path, int flags, ...) {
  REAL(openat64);
  OPEN_MODE(flags);
  if (flags & O_CREAT) point("openat", path);
  return real(dir, path, flags, mode);
}
int creat(const char* path, mode_t mode) {
  REAL(creat);
  point("creat", path);
  return real(path, mode);
}
