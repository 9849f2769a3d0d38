// The CUDA tools found and run for `kiln doctor` (tool_probe.hpp).
#include "builder/tool_probe.hpp"

#include <unistd.h>

#include <array>
#include <cstdio>

#include "runtime/environment.hpp"

namespace kiln::builder {

std::vector<std::string> tool_dirs(const std::string& cuda_home, const std::string& path) {
  std::vector<std::string> dirs;
  if (!cuda_home.empty()) dirs.push_back(cuda_home + "/bin");
  dirs.push_back("/usr/local/cuda/bin");
  std::string cur;
  for (const char* c = path.c_str();; ++c) {
    if (*c == ':' || *c == 0) {
      if (!cur.empty()) dirs.push_back(cur);
      cur.clear();
      if (!*c) break;
    } else {
      cur += *c;
    }
  }
  return dirs;
}

std::string version_line(std::string_view out) {
  std::string last;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t e = out.find('\n', pos);
    std::string line(
        out.substr(pos, e == std::string_view::npos ? std::string_view::npos : e - pos));
    // "Cuda compilation tools, release 13.0, V13.0.88" is the line that names the version.
    if (!line.empty() &&
        (last.find("release ") == std::string::npos || line.find("release ") != std::string::npos))
      last = line;
    if (e == std::string_view::npos) break;
    pos = e + 1;
  }
  return last;
}

namespace {

std::string find_tool(const std::string& name) {
  const runtime::Environment env = runtime::read_environment();  // the one table of variables (environment.hpp)
  for (const auto& d : tool_dirs(env.cuda_home, env.path)) {
    std::string path = d + "/" + name;
    if (::access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

}  // namespace

ToolFact probe_tool(const std::string& name) {
  ToolFact t;
  t.name = name;
  t.path = find_tool(name);
  if (t.path.empty()) {
    t.detail = "not found in $CUDA_HOME/bin, /usr/local/cuda/bin or PATH";
    return t;
  }
  std::string out;
  FILE* p = ::popen(("'" + t.path + "' --version 2>&1").c_str(), "r");
  if (!p) {
    t.detail = "cannot run";
    return t;
  }
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int st = ::pclose(p);
  std::string last = version_line(out);
  if (st != 0) {
    t.detail = "`" + name + " --version` failed (status " + std::to_string(st) + "): " + last;
    return t;
  }
  t.runnable = true;
  t.version = last;
  return t;
}

}  // namespace kiln::builder
