#include "builder/toolkit.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>

#include "kiln/error.hpp"
#include "runtime/environment.hpp"
#include "util/join.hpp"

extern char** environ;

namespace kiln::builder {
namespace fs = std::filesystem;

std::string ToolkitInfo::identity() const {
  if (kind == Kind::Nvrtc) return "nvrtc " + full_version + " (ptxas " + ptxas_version + ")";
  return "nvcc " + full_version;
}

std::string ToolkitInfo::compiler_name() const { return kind == Kind::Nvrtc ? "NVRTC" : "nvcc"; }

ToolkitSearch ToolkitSearch::from_env() {
  ToolkitSearch s;
  const runtime::Environment env = runtime::read_environment();  // the one table of variables (environment.hpp)
  if (!env.cuda_home.empty()) s.cuda_home = env.cuda_home;
  s.path = env.path;
  return s;
}

std::optional<std::string> find_on_path(const std::string& name, const std::string& path) {
  size_t start = 0;
  while (start <= path.size()) {
    size_t colon = path.find(':', start);
    std::string dir =
        path.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (!dir.empty()) {
      fs::path cand = fs::path(dir) / name;
      if (::access(cand.c_str(), X_OK) == 0 && !fs::is_directory(cand)) return cand.string();
    }
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return std::nullopt;
}

std::optional<std::pair<std::string, std::string>> parse_nvcc_version(std::string_view text) {
  auto rel = text.find("release ");
  if (rel == std::string_view::npos) return std::nullopt;
  auto v = text.find(", V", rel);
  if (v == std::string_view::npos) return std::nullopt;
  std::string short_v(text.substr(rel + 8, v - rel - 8));
  size_t end = v + 3;
  while (end < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.'))
    ++end;
  std::string full(text.substr(v + 3, end - v - 3));
  auto dot = short_v.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == short_v.size() || full.empty())
    return std::nullopt;
  for (char c : short_v)
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '.') return std::nullopt;
  return std::make_pair(short_v, full);
}

std::vector<std::string> parse_name_lines(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    std::string_view line =
        text.substr(start, nl == std::string_view::npos ? text.npos : nl - start);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())))
      line.remove_suffix(1);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front())))
      line.remove_prefix(1);
    if (!line.empty()) out.emplace_back(line);
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  return out;
}

std::vector<std::string> parse_allowed_values(std::string_view help, std::string_view option) {
  std::vector<std::string> out;
  // The option's paragraph starts at the line beginning with it and ends at the next option.
  size_t at = 0;
  while (true) {
    at = help.find(option, at);
    if (at == std::string_view::npos) return out;
    if ((at == 0 || help[at - 1] == '\n') &&
        (at + option.size() < help.size() && help[at + option.size()] == ' '))
      break;
    at += option.size();
  }
  size_t next = help.find("\n--", at + option.size());
  std::string_view para = help.substr(at, next == std::string_view::npos ? help.npos : next - at);
  auto allowed = para.find("Allowed values for this option:");
  if (allowed == std::string_view::npos) return out;
  std::string_view rest = para.substr(allowed);
  size_t end = rest.find("'.");
  if (end != std::string_view::npos) rest = rest.substr(0, end + 1);
  size_t i = 0;
  while ((i = rest.find('\'', i)) != std::string_view::npos) {
    size_t close = rest.find('\'', i + 1);
    if (close == std::string_view::npos) break;
    out.emplace_back(rest.substr(i + 1, close - i - 1));
    i = close + 1;
  }
  return out;
}

std::vector<std::string> supported_codes(const std::vector<std::string>& listed,
                                         const std::vector<std::string>& allowed_gpu_code) {
  std::set<std::string> base;
  for (const auto& l : listed)
    if (format::parse_target(l)) base.insert(l);
  std::set<std::string> out = base;
  for (const auto& a : allowed_gpu_code) {
    auto t = format::parse_target(a);
    if (!t || !t->suffix) continue;
    format::Target plain = *t;
    plain.suffix = 0;
    // An a/f variant counts only when its base arch is one nvcc lists as buildable.
    if (base.count(plain.str())) out.insert(a);
  }
  std::vector<std::string> v(out.begin(), out.end());
  std::sort(v.begin(), v.end(), [](const std::string& a, const std::string& b) {
    return *format::parse_target(a) < *format::parse_target(b);
  });
  return v;
}

void check_targets(const ToolkitInfo& tk, const std::vector<format::Target>& targets) {
  for (const auto& t : targets) {
    if (std::find(tk.codes.begin(), tk.codes.end(), t.str()) != tk.codes.end()) continue;
    std::string list = util::join(tk.codes, ", ");
    throw Error(ErrorKind::Unsupported,
                "target " + t.str() + " is not supported by " +
                    (tk.kind == ToolkitInfo::Kind::Nvrtc
                         ? tk.identity() + " at " + tk.root +
                               " (from nvrtcGetSupportedArchs and ptxas --help)"
                         : "nvcc " + tk.full_version + " at " + tk.nvcc +
                               " (from --list-gpu-code and --help)") +
                    "; it builds: " + list);
  }
}

std::string gencode_for(const format::Target& t) {
  format::Target virt = t;
  virt.kind = format::Target::Kind::Ptx;
  return "arch=" + virt.str() + ",code=" + t.str();
}

ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::map<std::string, std::string>& extra_env,
                          const std::function<void(const std::string&)>& on_line) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    if (!extra_env.count(key)) env_strings.push_back(kv);
  }
  for (const auto& [k, v] : extra_env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw Error(ErrorKind::Internal, std::string("pipe failed: ") + std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, cargv[0], &fa, nullptr, cargv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    throw Error(ErrorKind::Unsupported, "cannot run " + argv[0] + ": " + std::strerror(rc));
  }
  ProcessResult r;
  std::string pending;
  char buf[4096];
  while (true) {
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    r.output.append(buf, static_cast<size_t>(n));
    if (on_line) {
      pending.append(buf, static_cast<size_t>(n));
      size_t nl;
      while ((nl = pending.find('\n')) != std::string::npos) {
        on_line(pending.substr(0, nl));
        pending.erase(0, nl + 1);
      }
    }
  }
  if (on_line && !pending.empty()) on_line(pending);
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

namespace {

// Runs a toolkit binary that must exist and succeed; the error names the binary and its output.
std::string run_tool(const std::string& path, const std::vector<std::string>& args,
                     const std::string& why) {
  if (::access(path.c_str(), X_OK) != 0)
    throw Error(ErrorKind::Unsupported,
                path + " is missing or not executable (needed " + why +
                    "); install the complete CUDA toolkit there, or set CUDA_HOME to one");
  std::vector<std::string> argv{path};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessResult r = run_process(argv);
  if (r.exit_code != 0) {
    std::string cmd;
    for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    throw Error(ErrorKind::Unsupported, "'" + cmd + "' failed with exit code " +
                                            std::to_string(r.exit_code) + " (needed " + why +
                                            "):\n" + r.output);
  }
  return r.output;
}

}  // namespace

const ToolkitInfo& NvccToolkit::info() {
  if (info_) return *info_;
  ToolkitInfo tk;
  if (search_.cuda_home) {
    fs::path nvcc = fs::path(*search_.cuda_home) / "bin" / "nvcc";
    if (::access(nvcc.c_str(), X_OK) != 0)
      throw Error(ErrorKind::Unsupported,
                  "CUDA_HOME is set to '" + *search_.cuda_home + "' but " + nvcc.string() +
                      " does not exist or is not executable; set CUDA_HOME to the prefix of a "
                      "CUDA 13 toolkit (the directory holding bin/nvcc), or unset it");
    tk.nvcc = nvcc.string();
    tk.root = *search_.cuda_home;
    tk.found_via = "CUDA_HOME";
  } else if (fs::path d = fs::path(search_.default_root) / "bin" / "nvcc";
             ::access(d.c_str(), X_OK) == 0) {
    tk.nvcc = d.string();
    tk.root = search_.default_root;
    tk.found_via = search_.default_root;
  } else if (auto p = find_on_path("nvcc", search_.path)) {
    tk.nvcc = fs::absolute(*p).string();
    tk.root = fs::path(tk.nvcc).parent_path().parent_path().string();
    tk.found_via = "PATH";
  } else {
    throw Error(
        ErrorKind::Unsupported,
        "no CUDA toolkit found: looked for nvcc in $CUDA_HOME/bin (CUDA_HOME is not set), " +
            search_.default_root + "/bin and on PATH (" + search_.path +
            "). Install the CUDA 13 toolkit, or set CUDA_HOME to its prefix");
  }
  std::string bin = fs::path(tk.nvcc).parent_path().string();

  std::string ver = run_tool(tk.nvcc, {"--version"}, "to learn the toolkit version");
  auto v = parse_nvcc_version(ver);
  if (!v)
    throw Error(ErrorKind::Unsupported,
                "cannot read a CUDA release from '" + tk.nvcc + " --version':\n" + ver);
  tk.version = v->first;
  tk.full_version = v->second;

  auto arch = parse_name_lines(run_tool(tk.nvcc, {"--list-gpu-arch"}, "to list its targets"));
  auto code = parse_name_lines(run_tool(tk.nvcc, {"--list-gpu-code"}, "to list its targets"));
  std::vector<std::string> listed = arch;
  listed.insert(listed.end(), code.begin(), code.end());
  auto allowed =
      parse_allowed_values(run_tool(tk.nvcc, {"--help"}, "to list a/f targets"), "--gpu-code");
  tk.codes = supported_codes(listed, allowed);
  if (tk.codes.empty())
    throw Error(ErrorKind::Unsupported, "'" + tk.nvcc + " --list-gpu-code' listed no targets");

  // nvcc drives these for every --fatbin compile; a missing one fails only mid-build otherwise.
  run_tool(bin + "/ptxas", {"--version"}, "by nvcc to assemble SASS");
  run_tool(bin + "/fatbinary", {"--version"}, "by nvcc to write fatbins");
  info_ = std::move(tk);
  return *info_;
}

std::string host_compiler_identity(const std::string& ccbin, const std::string& path) {
  std::string name = ccbin.empty() ? "gcc" : ccbin;
  auto found = name.find('/') != std::string::npos ? std::optional<std::string>(name)
                                                   : find_on_path(name, path);
  if (!found) return name + " not found on PATH";
  try {
    ProcessResult r = run_process({*found, "--version"});
    std::string first = r.output.substr(0, r.output.find('\n'));
    if (r.exit_code != 0) return *found + " --version exited " + std::to_string(r.exit_code);
    return first;
  } catch (const Error& e) {
    return *found + " cannot be run: " + e.what();
  }
}

}  // namespace kiln::builder
