// An LD_PRELOAD library that kills its process with SIGKILL at the Nth call that changes the file
// system, or makes that call and every later one fail as a full disk, a quota, a dead disk or a
// read-only mount does (tests/crash/crash_points.sh; docs/decisions.md, "Crash points" and
// "I/O faults"). One counter for every thread of the process, kept in a shared file so that the
// harness reads how many points an unkilled run had. Only the process started with the library
// counts: it removes LD_PRELOAD from its environment, so nvcc, ninja or curl children are not
// counted, killed or failed.
//
//   CRASH_POINT_COUNTER=<file>   16 bytes (created zero by the harness): the points passed, then
//                                the calls made to fail
//   CRASH_POINT_AT=<N>           kill before the Nth point; 0 or unset: count only
//   CRASH_POINT_FAIL=<ERRNO>     ENOSPC, EDQUOT, EIO or EROFS: instead of the kill, the Nth point
//                                and every later one fail with that errno (the fault persists: a
//                                full disk stays full); see fault() for what each lets through
//   CRASH_POINT_LOG=<file>       optional: one line per point ("<n> <call> <path>", " FAILED"
//                                appended to a call made to fail)
//
// A point is: write/pwrite/writev/copy_file_range/sendfile to a regular file, fsync, fdatasync,
// syncfs, rename(at,at2), mkdir(at), unlink(at), rmdir, remove, link(at), symlink(at), ftruncate,
// and open/openat/creat with O_CREAT. A kill is not made: the process dies on its way in,
// between the previous call and this one. A failed call changes nothing and returns -1 with
// errno set, but for the first write under ENOSPC or EDQUOT, which writes half of what it was
// given (what still fitted) and returns that short count.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
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

static _Atomic uint64_t* counter;  // [0] points passed, [1] calls made to fail
static uint64_t kill_at;
static int fail_errno;  // 0: kill at kill_at; else every point from kill_at on fails with it
static int log_fd = -1;

__attribute__((constructor)) static void crash_point_init(void) {
  const char* counter_path = getenv("CRASH_POINT_COUNTER");
  const char* at = getenv("CRASH_POINT_AT");
  const char* log_path = getenv("CRASH_POINT_LOG");
  unsetenv("LD_PRELOAD");
  if (counter_path == NULL) return;
  int fd = (int)syscall(SYS_openat, AT_FDCWD, counter_path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return;
  void* map = mmap(NULL, 2 * sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  syscall(SYS_close, fd);
  if (map == MAP_FAILED) return;
  counter = (_Atomic uint64_t*)map;
  kill_at = at != NULL ? strtoull(at, NULL, 10) : 0;
  const char* fail = getenv("CRASH_POINT_FAIL");
  if (fail != NULL && *fail != '\0') {
    if (strcmp(fail, "ENOSPC") == 0) fail_errno = ENOSPC;
    else if (strcmp(fail, "EDQUOT") == 0) fail_errno = EDQUOT;
    else if (strcmp(fail, "EIO") == 0) fail_errno = EIO;
    else if (strcmp(fail, "EROFS") == 0) fail_errno = EROFS;
    else {
      static const char msg[] = "kill_at_point: CRASH_POINT_FAIL is none of ENOSPC EDQUOT EIO EROFS\n";
      syscall(SYS_write, 2, msg, sizeof msg - 1);
      _exit(125);
    }
  }
  if (log_path != NULL)
    log_fd = (int)syscall(SYS_openat, AT_FDCWD, log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                          0644);
}

// What a point does: go on with the real call, or fail it (errno set), or, for the first write
// on a full disk, write part of it.
enum action { PROCEED, FAIL, SHORT_WRITE };

// The kinds of call, for what a fault lets through.
enum kind { CHANGE, REMOVAL, WRITE, CREATE_EXISTING, CREATE_EXISTING_READ_ONLY, EXISTING_DIR };

// Whether a persistent fault fails a call of this kind. A full disk or quota (ENOSPC, EDQUOT)
// still lets files and directories be removed (removing frees space) and existing files be
// opened (nothing to allocate); a read-only mount (EROFS) opens an existing file for reading
// only; a dead disk (EIO) fails everything. mkdir of an existing path is EEXIST under every
// fault (the kernel looks the name up first).
static int fault_fails(enum kind k) {
  if (k == EXISTING_DIR) return 0;
  if (fail_errno == ENOSPC || fail_errno == EDQUOT)
    return k != REMOVAL && k != CREATE_EXISTING && k != CREATE_EXISTING_READ_ONLY;
  if (fail_errno == EROFS) return k != CREATE_EXISTING_READ_ONLY;
  return 1;
}

static enum action point_of(const char* call, const char* path, enum kind k) {
  if (counter == NULL) return PROCEED;
  uint64_t n = atomic_fetch_add(&counter[0], 1) + 1;
  enum action act = PROCEED;
  if (fail_errno != 0 && kill_at != 0 && n >= kill_at && fault_fails(k)) {
    uint64_t failed = atomic_fetch_add(&counter[1], 1);
    act = k == WRITE && failed == 0 && (fail_errno == ENOSPC || fail_errno == EDQUOT)
              ? SHORT_WRITE
              : FAIL;
  }
  if (log_fd >= 0) {
    char line[4200];
    int len = snprintf(line, sizeof line, "%llu %s %s%s\n", (unsigned long long)n, call,
                       path != NULL ? path : "", act == PROCEED ? "" : " FAILED");
    if (len > (int)sizeof line - 1) len = (int)sizeof line - 1;
    syscall(SYS_write, log_fd, line, (size_t)len);
  }
  if (fail_errno == 0 && kill_at != 0 && n == kill_at) {
    syscall(SYS_kill, getpid(), SIGKILL);
    for (;;) pause();
  }
  if (act == FAIL) errno = fail_errno;
  return act;
}

static void point(const char* call, const char* path) { (void)point_of(call, path, CHANGE); }

static const char* fd_path(int fd, char* buf, size_t size) {
  char link[64];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, buf, size - 1);
  buf[n > 0 ? n : 0] = '\0';
  return buf;
}

// Writes count only to regular files: a socket, a pipe or the terminal holds no state to tear.
static enum action fd_point(const char* call, int fd, int only_regular, enum kind k) {
  if (counter == NULL) return PROCEED;
  if (only_regular) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return PROCEED;
  }
  char buf[4096];
  return point_of(call, log_fd >= 0 ? fd_path(fd, buf, sizeof buf) : NULL, k);
}

// The C library's own function, looked up once.
#define REAL(fn)                      \
  static __typeof__(fn)* real = NULL; \
  if (real == NULL) real = (__typeof__(fn)*)dlsym(RTLD_NEXT, #fn)

// A write's point: fail, write half (the first write on a full disk), or go on.
#define WRITE_POINT(call, fd, n, half_call)          \
  switch (fd_point(call, fd, 1, WRITE)) {            \
    case FAIL: return -1;                            \
    case SHORT_WRITE: if ((n) > 1) return half_call; \
                      errno = fail_errno; return -1; \
    case PROCEED: break;                             \
  }

ssize_t write(int fd, const void* data, size_t n) {
  REAL(write);
  WRITE_POINT("write", fd, n, real(fd, data, n / 2));
  return real(fd, data, n);
}
ssize_t pwrite(int fd, const void* data, size_t n, off_t off) {
  REAL(pwrite);
  WRITE_POINT("pwrite", fd, n, real(fd, data, n / 2, off));
  return real(fd, data, n, off);
}
ssize_t pwrite64(int fd, const void* data, size_t n, off_t off) {
  REAL(pwrite64);
  WRITE_POINT("pwrite", fd, n, real(fd, data, n / 2, off));
  return real(fd, data, n, off);
}
ssize_t writev(int fd, const struct iovec* iov, int count) {
  REAL(writev);
  // A short writev: the first buffer alone, when there are several (or half of the only one).
  struct iovec half = {count > 0 ? iov[0].iov_base : NULL, count > 0 ? iov[0].iov_len / 2 : 0};
  size_t n = count > 1 ? 2 : (count == 1 ? iov[0].iov_len : 0);
  WRITE_POINT("writev", fd, n, count > 1 ? real(fd, iov, 1) : real(fd, &half, 1));
  return real(fd, iov, count);
}
// std::filesystem::copy_file copies with these (the kernel writes, not write()).
ssize_t copy_file_range(int in, off_t* in_off, int out, off_t* out_off, size_t n, unsigned flags) {
  REAL(copy_file_range);
  WRITE_POINT("copy_file_range", out, n, real(in, in_off, out, out_off, n / 2, flags));
  return real(in, in_off, out, out_off, n, flags);
}
ssize_t sendfile(int out, int in, off_t* off, size_t n) {
  REAL(sendfile);
  WRITE_POINT("sendfile", out, n, real(out, in, off, n / 2));
  return real(out, in, off, n);
}

// A call on a descriptor, or on a path, that fails as a whole.
#define FD_CALL(call, fd, fn, ...)                                  \
  REAL(fn);                                                         \
  if (fd_point(call, fd, 0, CHANGE) == FAIL) return -1;             \
  return real(__VA_ARGS__)
#define PATH_CALL(call, path, k, fn, ...)                           \
  REAL(fn);                                                         \
  if (point_of(call, path, k) == FAIL) return -1;                   \
  return real(__VA_ARGS__)

int fsync(int fd) { FD_CALL("fsync", fd, fsync, fd); }
int fdatasync(int fd) { FD_CALL("fdatasync", fd, fdatasync, fd); }
int syncfs(int fd) { FD_CALL("syncfs", fd, syncfs, fd); }
int ftruncate(int fd, off_t len) { FD_CALL("ftruncate", fd, ftruncate, fd, len); }
int ftruncate64(int fd, off_t len) { FD_CALL("ftruncate", fd, ftruncate64, fd, len); }
int rename(const char* from, const char* to) { PATH_CALL("rename", to, CHANGE, rename, from, to); }
int renameat(int from_dir, const char* from, int to_dir, const char* to) {
  PATH_CALL("renameat", to, CHANGE, renameat, from_dir, from, to_dir, to);
}
int renameat2(int from_dir, const char* from, int to_dir, const char* to, unsigned flags) {
  PATH_CALL("renameat2", to, CHANGE, renameat2, from_dir, from, to_dir, to, flags);
}

// Whether a name exists (relative to dir), without following a last symbolic link.
static int exists_at(int dir, const char* path) {
  struct stat st;
  return fstatat(dir, path, &st, AT_SYMLINK_NOFOLLOW) == 0;
}
// mkdir of a name that exists is EEXIST, fault or not: only a new directory is a change a fault
// can fail.
static enum kind mkdir_kind(int dir, const char* path) {
  return fail_errno != 0 && exists_at(dir, path) ? EXISTING_DIR : CHANGE;
}
int mkdir(const char* path, mode_t mode) {
  PATH_CALL("mkdir", path, mkdir_kind(AT_FDCWD, path), mkdir, path, mode);
}
int mkdirat(int dir, const char* path, mode_t mode) {
  PATH_CALL("mkdirat", path, mkdir_kind(dir, path), mkdirat, dir, path, mode);
}
int unlink(const char* path) { PATH_CALL("unlink", path, REMOVAL, unlink, path); }
int unlinkat(int dir, const char* path, int flags) {
  PATH_CALL("unlinkat", path, REMOVAL, unlinkat, dir, path, flags);
}
int rmdir(const char* path) { PATH_CALL("rmdir", path, REMOVAL, rmdir, path); }
int remove(const char* path) { PATH_CALL("remove", path, REMOVAL, remove, path); }
int link(const char* from, const char* to) { PATH_CALL("link", to, CHANGE, link, from, to); }
int linkat(int from_dir, const char* from, int to_dir, const char* to, int flags) {
  PATH_CALL("linkat", to, CHANGE, linkat, from_dir, from, to_dir, to, flags);
}
int symlink(const char* target, const char* path) {
  PATH_CALL("symlink", path, CHANGE, symlink, target, path);
}
int symlinkat(const char* target, int dir, const char* path) {
  PATH_CALL("symlinkat", path, CHANGE, symlinkat, target, dir, path);
}

// open/openat/creat count only when they may create the file. Opening a file that exists creates
// nothing: a full disk lets it through, a read-only mount only for reading.
static enum kind open_kind(int dir, const char* path, int flags) {
  if (fail_errno == 0 || (flags & O_EXCL) || !exists_at(dir, path)) return CHANGE;
  return (flags & (O_WRONLY | O_RDWR | O_TRUNC)) ? CREATE_EXISTING : CREATE_EXISTING_READ_ONLY;
}

#define OPEN_MODE(flags)                   \
  mode_t mode = 0;                         \
  if ((flags) & (O_CREAT | __O_TMPFILE)) { \
    va_list args;                          \
    va_start(args, flags);                 \
    mode = va_arg(args, mode_t);           \
    va_end(args);                          \
  }
#define OPEN_POINT(call, dir, path, flags) \
  if (((flags) & O_CREAT) && point_of(call, path, open_kind(dir, path, flags)) == FAIL) return -1

int open(const char* path, int flags, ...) {
  REAL(open);
  OPEN_MODE(flags);
  OPEN_POINT("open", AT_FDCWD, path, flags);
  return real(path, flags, mode);
}
int open64(const char* path, int flags, ...) {
  REAL(open64);
  OPEN_MODE(flags);
  OPEN_POINT("open", AT_FDCWD, path, flags);
  return real(path, flags, mode);
}
int openat(int dir, const char* path, int flags, ...) {
  REAL(openat);
  OPEN_MODE(flags);
  OPEN_POINT("openat", dir, path, flags);
  return real(dir, path, flags, mode);
}
int openat64(int dir, const char* path, int flags, ...) {
  REAL(openat64);
  OPEN_MODE(flags);
  OPEN_POINT("openat", dir, path, flags);
  return real(dir, path, flags, mode);
}
int creat(const char* path, mode_t mode) {
  REAL(creat);
  OPEN_POINT("creat", AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC);
  return real(path, mode);
}
