// Toolkits as a user names them, and the targets each builds (toolkit_choice.hpp).
#include "builder/toolkit_choice.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <sstream>

#include "builder/nvrtc_toolkit.hpp"
#include "io/atomic_file.hpp"
#include "project/package.hpp"
#include "kiln/error.hpp"

namespace kiln::builder {
namespace fs = std::filesystem;

namespace {

bool is_cuda_release(const std::string& s) {
  auto dot = s.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == s.size()) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '.'; }) &&
         s.find('.', dot + 1) == std::string::npos;
}

// The release of the nvcc in `root`/bin, or "" when there is none or it does not answer.
std::string nvcc_release(const std::string& root) {
  fs::path nvcc = fs::path(root) / "bin" / "nvcc";
  if (::access(nvcc.c_str(), X_OK) != 0) return "";
  try {
    ProcessResult r = run_process({nvcc.string(), "--version"});
    auto v = r.exit_code == 0 ? parse_nvcc_version(r.output) : std::nullopt;
    return v ? v->first : "";
  } catch (const Error&) {
    return "";
  }
}

}  // namespace

std::vector<std::string> parse_toolkit_list(std::string_view text, const std::string& origin) {
  std::vector<std::string> out;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    std::istringstream parts(line);
    std::string item;
    while (std::getline(parts, item, ',')) {
      auto b = item.find_first_not_of(" \t\r");
      auto e = item.find_last_not_of(" \t\r");
      if (b == std::string::npos) continue;
      item = item.substr(b, e - b + 1);
      bool ok = is_cuda_release(item) ||
                (item.rfind("nvrtc:", 0) == 0 && item.size() > 6) ||
                item.find('/') != std::string::npos;
      if (!ok)
        throw Error(ErrorKind::Usage,
                    origin + ": '" + item + "' is not a toolkit (a CUDA release such as 13.0, "
                                            "nvrtc:DIR, or the path of a CUDA install)");
      if (std::find(out.begin(), out.end(), item) != out.end())
        throw Error(ErrorKind::Usage, origin + ": toolkit '" + item + "' is listed twice");
      out.push_back(item);
    }
  }
  if (out.empty()) throw Error(ErrorKind::Usage, origin + " lists no toolkits");
  return out;
}

std::unique_ptr<Toolkit> find_toolkit(const std::string& name, const ToolkitSearch& search) {
  if (name.rfind("nvrtc:", 0) == 0)
    return std::make_unique<NvrtcToolkit>(name.substr(6), name);
  if (!is_cuda_release(name)) {
    ToolkitSearch s = search;
    s.cuda_home = name;  // must hold bin/nvcc: no fallback
    return std::make_unique<NvccToolkit>(s);
  }
  std::vector<std::string> roots = {"/usr/local/cuda-" + name};
  if (search.cuda_home) roots.push_back(*search.cuda_home);
  roots.push_back(search.default_root);
  if (auto p = find_on_path("nvcc", search.path))
    roots.push_back(fs::path(*p).parent_path().parent_path().string());
  std::string looked;
  std::set<std::string> seen;
  for (const auto& r : roots) {
    if (!seen.insert(r).second) continue;
    std::string rel = nvcc_release(r);
    looked += (looked.empty() ? "" : ", ") + r + "/bin/nvcc" +
              (rel.empty() ? " (none)" : " (CUDA " + rel + ")");
    if (rel == name) {
      ToolkitSearch s = search;
      s.cuda_home = r;
      return std::make_unique<NvccToolkit>(s);
    }
  }
  throw Error(ErrorKind::Unsupported,
              "no nvcc of CUDA " + name + " found: looked at " + looked +
                  ". Install it, name its prefix, or name an NVRTC toolkit of that release as "
                  "nvrtc:DIR (scripts/nvrtc_toolkit.sh lays one out)");
}

ToolkitTargets toolkit_targets(const ToolkitInfo& tk, const std::vector<format::Target>& targets) {
  ToolkitTargets out;
  for (const auto& t : targets) {
    if (std::find(tk.codes.begin(), tk.codes.end(), t.str()) != tk.codes.end())
      out.build.push_back(t);
    else
      out.left_out.push_back("CUDA " + tk.version + " (" + tk.identity() + ") does not build " +
                             t.str() + "; left out");
  }
  return out;
}

BuildToolkits project_build_toolkits(const std::string& flag, const std::string& source_dir) {
  if (!flag.empty()) return {parse_toolkit_list(flag, "--toolkits"), "--toolkits"};
  // A project's list names directories relative to the project.
  auto anchored = [&](std::vector<std::string> names) {
    for (auto& n : names) {
      bool nv = n.rfind("nvrtc:", 0) == 0;
      std::string dir = nv ? n.substr(6) : n;
      if (!is_cuda_release(n) && fs::path(dir).is_relative())
        n = (nv ? "nvrtc:" : "") + (fs::path(source_dir) / dir).lexically_normal().string();
    }
    return names;
  };
  const auto package = project::read_package_file(source_dir);
  if (!package.toolkits.empty()) {
    std::string list;
    for (const auto& t : package.toolkits) list += t + "\n";
    return {anchored(parse_toolkit_list(list, "registry/package.json \"toolkits\"")),
            "registry/package.json"};
  }
  const fs::path file = fs::path(source_dir) / "ci" / "toolkits.txt";
  std::error_code ec;
  if (fs::exists(file, ec)) {
    std::string text;
    try {
      text = io::read_whole_file(file, std::uint64_t{1} << 20);
    } catch (const Error& e) {
      throw Error(ErrorKind::Usage, std::string("no --toolkits given and ci/toolkits.txt cannot be read: ") + e.what());
    }
    return {anchored(parse_toolkit_list(text, file.string())), "ci/toolkits.txt"};
  }
  return {{}, "the nvcc of CUDA_HOME, /usr/local/cuda or PATH"};
}

namespace {

std::string none_built(const ToolkitInfo& tk, const std::vector<format::Target>& targets) {
  std::string asked, codes;
  for (const auto& t : targets) asked += (asked.empty() ? "" : ",") + t.str();
  for (const auto& x : tk.codes) codes += (codes.empty() ? "" : ", ") + x;
  return "CUDA " + tk.version + " (" + tk.identity() + ") builds none of the targets " + asked +
         "; it builds: " + codes;
}

}  // namespace

std::string toolkit_build_dir(const ToolkitInfo& tk) {
  return "toolkit-" + tk.version + "-" + (tk.kind == ToolkitInfo::Kind::Nvrtc ? "nvrtc" : "nvcc");
}

std::vector<ChosenToolkit> choose_toolkits(const BuildToolkits& toolkits,
                                           const std::vector<format::Target>& targets,
                                           const ToolkitSearch& search) {
  std::vector<ChosenToolkit> out;
  if (toolkits.names.empty()) {
    ChosenToolkit c;
    c.targets = targets;
    c.toolkit = std::make_unique<NvccToolkit>(search);
    out.push_back(std::move(c));
    return out;
  }
  std::vector<std::string> none;  // a line for each toolkit that builds none of the targets
  for (const auto& name : toolkits.names) {
    ChosenToolkit c;
    c.name = name;
    c.toolkit = find_toolkit(name, search);
    const ToolkitInfo& tk = c.toolkit->info();
    for (const auto& other : out)
      if (other.toolkit->info().version == tk.version)
        throw Error(ErrorKind::Usage,
                    "toolkits " + other.name + " and " + name + " (from " + toolkits.origin +
                        ") are both CUDA " + tk.version +
                        ": a release holds one archive per toolkit version and target");
    ToolkitTargets split = toolkit_targets(tk, targets);
    if (split.build.empty()) {
      none.push_back(none_built(tk, targets));
      continue;
    }
    c.targets = std::move(split.build);
    c.left_out = std::move(split.left_out);
    c.build_dir = toolkit_build_dir(tk);
    out.push_back(std::move(c));
  }
  if (out.empty()) {
    std::string msg;
    for (const auto& l : none) msg += (msg.empty() ? "" : "; ") + l;
    throw Error(ErrorKind::Unsupported, msg);
  }
  // A toolkit that builds none of the targets, beside one that does, is left out with its line.
  for (const auto& l : none) out.front().left_out.push_back(l + "; left out");
  return out;
}

}  // namespace kiln::builder
