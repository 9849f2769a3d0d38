// What opening libkiln costs an application, against opening libcrypto (one library libkiln
// itself needs) in the same run. Every sample is a fresh process (fork + exec of this program,
// which links neither library), so nothing is loaded yet; the modes alternate so that drift in
// the machine's load hits both alike. Each child times one dlopen (RTLD_NOW: every symbol bound
// up front; default: RTLD_LAZY) and reports nanoseconds through a pipe.
//
//   kiln_dlopen_bench [--runs N] [--kiln PATH] [--crypto SONAME]
//
// Prints median/min/max per mode, the libkiln/libcrypto ratio of the medians, and the number
// of lines `ldd` prints for libkiln (docs/performance.md, "Opening libkiln").
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#ifndef KILN_BENCH_LIBKILN
#error "CMake defines KILN_BENCH_LIBKILN (the built libkiln) and KILN_BENCH_LIBCRYPTO (its SONAME)"
#endif

namespace {

struct Mode {
  const char* name;
  bool kiln;
  int flags;
};

const Mode kModes[] = {{"dlopen(libcrypto) RTLD_NOW", false, RTLD_NOW},
                       {"dlopen(libkiln)   RTLD_NOW", true, RTLD_NOW},
                       {"dlopen(libcrypto) default", false, RTLD_LAZY},
                       {"dlopen(libkiln)   default", true, RTLD_LAZY}};

int child(const char* file, int flags, int out_fd) {
  auto t0 = std::chrono::steady_clock::now();
  void* h = ::dlopen(file, flags);
  auto t1 = std::chrono::steady_clock::now();
  if (!h) {
    const char* e = ::dlerror();
    std::fprintf(stderr, "dlopen(%s) failed: %s\n", file, e ? e : "?");
    return 1;
  }
  long long ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
  std::string s = std::to_string(ns);
  return ::write(out_fd, s.data(), s.size()) == static_cast<ssize_t>(s.size()) ? 0 : 1;
}

// One fresh process timing one dlopen; -1 when it failed.
double sample_ms(const char* self, const char* file, int flags) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    ::close(fds[0]);
    std::string fd = std::to_string(fds[1]), fl = std::to_string(flags);
    ::execl(self, self, "--child", file, fl.c_str(), fd.c_str(), static_cast<char*>(nullptr));
    std::perror("exec");
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string got;
  std::array<char, 64> buf{};
  ssize_t n;
  while ((n = ::read(fds[0], buf.data(), buf.size())) > 0)
    got.append(buf.data(), static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || got.empty()) return -1;
  return std::atof(got.c_str()) / 1e6;
}

int ldd_lines(const std::string& lib) {
  FILE* p = ::popen(("ldd '" + lib + "' 2>/dev/null").c_str(), "r");
  if (!p) return -1;
  int lines = 0;
  for (int c; (c = std::fgetc(p)) != EOF;) lines += c == '\n';
  return ::pclose(p) == 0 ? lines : -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::strcmp(argv[1], "--child") == 0)
    return child(argv[2], std::atoi(argv[3]), std::atoi(argv[4]));
  int runs = 21;
  std::string kiln = KILN_BENCH_LIBKILN, crypto = KILN_BENCH_LIBCRYPTO;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) {
      runs = std::atoi(argv[++i]);
    } else if (a == "--kiln" && i + 1 < argc) {
      kiln = argv[++i];
    } else if (a == "--crypto" && i + 1 < argc) {
      crypto = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--runs N (>= 15)] [--kiln PATH] [--crypto SONAME]\n",
                   argv[0]);
      return 2;
    }
  }
  if (runs < 15) {
    std::fprintf(stderr, "--runs must be at least 15, got %d\n", runs);
    return 2;
  }
  char self[4096];
  ssize_t len = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) return 1;
  self[len] = 0;

  std::vector<std::vector<double>> ms(std::size(kModes));
  for (int r = 0; r < runs; ++r)
    for (std::size_t m = 0; m < std::size(kModes); ++m) {
      const Mode& mode = kModes[m];
      double t = sample_ms(self, mode.kiln ? kiln.c_str() : crypto.c_str(), mode.flags);
      if (t < 0) {
        std::fprintf(stderr, "%s: the child failed\n", mode.name);
        return 1;
      }
      ms[m].push_back(t);
    }

  std::printf("libkiln:   %s\nlibcrypto: %s\nfresh processes per mode: %d (alternating)\n",
              kiln.c_str(), crypto.c_str(), runs);
  std::vector<double> median(std::size(kModes));
  for (std::size_t m = 0; m < std::size(kModes); ++m) {
    std::vector<double> v = ms[m];
    std::sort(v.begin(), v.end());
    median[m] = v[v.size() / 2];
    std::printf("%-28s median %7.3f ms  min %7.3f  max %7.3f\n", kModes[m].name, median[m],
                v.front(), v.back());
  }
  double now_ratio = median[1] / median[0], lazy_ratio = median[3] / median[2];
  std::printf("ratio libkiln/libcrypto (medians): RTLD_NOW %.2fx, default %.2fx (goal <= 2x)\n",
              now_ratio, lazy_ratio);
  std::printf("ldd %s: %d lines\n", kiln.c_str(), ldd_lines(kiln));
  return 0;
}
