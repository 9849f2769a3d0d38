// Kernel packages: the project files, the generated description and the loader's view of it
// (kiln/package.h).
#include "project/package.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "format/manifest.hpp"
#include "io/atomic_file.hpp"
#include "kiln/error.hpp"
#include "util/field_error.hpp"

namespace kiln::project {

namespace fs = std::filesystem;

namespace {

using util::fail;

// A project file, bounded like any local file kiln reads whole; nullopt when there is none.
std::optional<std::string> read_file(const fs::path& p) {
  std::error_code ec;
  if (!fs::exists(p, ec)) return std::nullopt;
  return io::read_whole_file(p);
}

const char* kProjectLayout =
    "a kernel project holds VERSION, registry/package.json ({\"format\": 1, \"name\": ...}), "
    "registry/kernels.json and kernels/ (docs/packages.md)";

std::string read_required(const fs::path& root, const char* rel) {
  fs::path p = root / rel;
  std::optional<std::string> text = read_file(p);
  if (!text)
    throw Error(ErrorKind::NotFound, "no " + std::string(rel) + " in " + root.string() +
                                         " (looked for " + p.string() + "): " + kProjectLayout)
        .with("path", p.string());
  return *text;
}

// A C string literal of arbitrary bytes: printable ASCII as is, everything else as three-digit
// octal escapes (never followed by a digit that would extend them), split every 96 bytes.
std::string c_literal(std::string_view bytes) {
  std::string out = "\"";
  std::size_t col = 0;
  bool last_octal = false;
  for (unsigned char c : bytes) {
    if (col >= 96) {
      out += "\"\n    \"";
      col = 0;
      last_octal = false;
    }
    bool digit = c >= '0' && c <= '9';
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      last_octal = false;
    } else if (c >= 0x20 && c < 0x7f && c != '?' && !(last_octal && digit)) {
      out += static_cast<char>(c);  // '?' escaped: no trigraphs
      last_octal = false;
    } else {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\%03o", c);
      out += buf;
      last_octal = true;
    }
    ++col;
  }
  return out + "\"";
}

}  // namespace

bool is_c_identifier(std::string_view s) {
  if (s.empty()) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

namespace {

// "targets": a non-empty array of distinct target strings.
std::vector<format::Target> parse_package_targets(const nlohmann::json& list, const std::string& origin) {
  if (!list.is_array() || list.empty())
    fail(origin, "targets", "expected a non-empty array of targets, e.g. [\"sm_80\", \"sm_90a\"]");
  std::vector<format::Target> out;
  for (const auto& item : list) {
    if (!item.is_string()) fail(origin, "targets", "expected strings, found " + item.dump());
    const std::string text = item.get<std::string>();
    std::optional<format::Target> t = format::parse_target(text);
    if (!t)
      fail(origin, "targets",
           "'" + text +
               "' is not a target: expected sm_<arch>[a|f] or compute_<arch>[a|f], e.g. sm_90a "
               "or compute_80");
    if (std::find(out.begin(), out.end(), *t) != out.end())
      fail(origin, "targets", "'" + text + "' is listed twice");
    out.push_back(*t);
  }
  return out;
}

}  // namespace

PackageFile parse_package_file(std::string_view text, const std::string& origin) {
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    fail(origin, "", std::string("not valid JSON: ") + e.what());
  }
  if (!root.is_object()) fail(origin, "", "expected a JSON object at the top level");
  for (auto it = root.begin(); it != root.end(); ++it)
    if (it.key() != "format" && it.key() != "name" && it.key() != "targets" &&
        it.key() != "toolkits" && it.key() != "comment")
      fail(origin, it.key(), "unknown field (allowed: format, name, targets, toolkits, comment)");
  if (!root.contains("format") || !root["format"].is_number_integer())
    fail(origin, "format", "missing or not an integer");
  int format = root["format"].get<int>();
  if (format != kPackageFileFormat)
    fail(origin, "format",
         "version " + std::to_string(format) + " is too " +
             (format < kPackageFileFormat ? "old" : "new (upgrade kiln)") +
             "; this kiln reads version " + std::to_string(kPackageFileFormat));
  if (!root.contains("name") || !root["name"].is_string()) fail(origin, "name", "missing");
  PackageFile pf;
  pf.name = root["name"].get<std::string>();
  if (!format::is_package_name(pf.name))
    fail(origin, "name", std::string(format::kPackageNameRule) + ", found '" + pf.name + "'");
  if (root.contains("targets")) pf.targets = parse_package_targets(root["targets"], origin);
  // "toolkits": the toolkits a release is built with, as `kiln build --toolkits` names them
  // (packager/builder/toolkit_choice.hpp checks each name).
  if (root.contains("toolkits")) {
    const auto& list = root["toolkits"];
    if (!list.is_array() || list.empty())
      fail(origin, "toolkits", "expected a non-empty array of toolkits, e.g. [\"13.0\", \"12.9\"]");
    for (const auto& item : list) {
      if (!item.is_string() || item.get<std::string>().empty())
        fail(origin, "toolkits", "expected non-empty strings, found " + item.dump());
      pf.toolkits.push_back(item.get<std::string>());
    }
  }
  return pf;
}

PackageFile read_package_file(const fs::path& project_root) {
  return parse_package_file(read_required(project_root, "registry/package.json"),
                            (project_root / "registry" / "package.json").string());
}

std::string parse_version_file(std::string_view text, const std::string& origin) {
  std::string v(text);
  while (!v.empty() && (v.back() == '\n' || v.back() == '\r' || v.back() == ' ')) v.pop_back();
  if (!format::is_package_version(v))
    throw Error(ErrorKind::Format,
                origin + ": expected one line MAJOR.MINOR.PATCH[-prerelease], found '" + v + "'")
        .with("path", origin);
  return v;
}

Project load_project(const fs::path& root_in) {
  std::error_code ec;
  fs::path root = fs::absolute(root_in, ec).lexically_normal();
  if (ec) root = root_in;
  if (!fs::is_directory(root, ec))
    throw Error(ErrorKind::NotFound,
                "kernel project " + root.string() + " is not a directory: " + kProjectLayout)
        .with("path", root.string());
  Project p;
  p.root = root;
  p.version = parse_version_file(read_required(root, "VERSION"), (root / "VERSION").string());
  PackageFile package_file = read_package_file(root);
  p.name = std::move(package_file.name);
  p.targets = std::move(package_file.targets);
  const fs::path registry_file = root / "registry" / "kernels.json";
  p.registry_text = read_required(root, "registry/kernels.json");
  p.registry = parse_registry(p.registry_text, registry_file.string());
  // The hashing reads go through a tree that keeps what it read: PackageData embeds those
  // bytes instead of reading the files a second time.
  class KeepingTree : public SourceTree {
   public:
    KeepingTree(const fs::path& dir, std::map<std::string, std::string>& kept)
        : disk_((dir).string()), kept_(kept) {}
    std::optional<std::string> read(const std::string& relpath) const override {
      std::optional<std::string> bytes = disk_.read(relpath);
      if (bytes) kept_[relpath] = *bytes;
      return bytes;
    }
    std::string describe() const override { return disk_.describe(); }

   private:
    DiskSourceTree disk_;
    std::map<std::string, std::string>& kept_;
  };
  compute_source_hashes(p.registry, KeepingTree(root / "kernels", p.sources));
  return p;
}

PackageData::PackageData(const Project& project) : name_(project.name), version_(project.version) {
  const Registry& reg = project.registry;
  inputs_ = {project.root / "VERSION", project.root / "registry" / "package.json",
             project.root / "registry" / "kernels.json"};
  files_.emplace_back("registry/kernels.json", project.registry_text);
  std::set<std::string> hashed;
  for (const auto& f : reg.families) hashed.insert(f.hashed_files.begin(), f.hashed_files.end());
  for (const auto& rel : hashed) {
    auto it = project.sources.find(rel);
    if (it == project.sources.end())
      throw Error(ErrorKind::Internal, "package " + name_ + ": kernels/" + rel +
                                           " is hashed but was not kept by load_project");
    files_.emplace_back("kernels/" + rel, it->second);
    inputs_.push_back(project.root / "kernels" / rel);
  }
  kernels_.reserve(reg.specialisations.size());
  for (const auto& s : reg.specialisations) {
    Kernel k;
    k.uri = s.uri;
    k.family = s.family;
    k.source_hash = s.source_hash;
    for (const auto& [key, value] : s.params) {
      k.params.push_back(key);
      k.params.push_back(value);
    }
    k.entries = s.entries;
    kernels_.push_back(std::move(k));
  }
  link();
}

PackageData::PackageData(std::string name, std::string version, std::vector<Kernel> kernels,
                         std::vector<std::pair<std::string, std::string>> files)
    : name_(std::move(name)),
      version_(std::move(version)),
      kernels_(std::move(kernels)),
      files_(std::move(files)) {
  link();
}

void PackageData::link() {
  std::sort(kernels_.begin(), kernels_.end(), [](const Kernel& a, const Kernel& b) {
    return std::strcmp(a.uri.c_str(), b.uri.c_str()) < 0;
  });
  param_ptrs_.assign(kernels_.size(), {});
  entry_ptrs_.assign(kernels_.size(), {});
  ckernels_.clear();
  for (std::size_t i = 0; i < kernels_.size(); ++i) {
    const Kernel& k = kernels_[i];
    for (const auto& s : k.params) param_ptrs_[i].push_back(s.c_str());
    for (const auto& s : k.entries) entry_ptrs_[i].push_back(s.c_str());
    ckernels_.push_back({k.uri.c_str(), k.family.c_str(), param_ptrs_[i].data(),
                         k.params.size() / 2, entry_ptrs_[i].data(), entry_ptrs_[i].size(),
                         k.source_hash.c_str()});
  }
  cfiles_.clear();
  for (const auto& [path, bytes] : files_)
    cfiles_.push_back({path.c_str(), bytes.data(), bytes.size()});
  desc_.abi_version = KILN_PACKAGE_ABI_VERSION;
  desc_.name = name_.c_str();
  desc_.version = version_.c_str();
  desc_.kernels = ckernels_.data();
  desc_.kernel_count = ckernels_.size();
  desc_.files = cfiles_.data();
  desc_.file_count = cfiles_.size();
}

std::string PackageData::to_c_source(const std::string& symbol) const {
  if (!is_c_identifier(symbol))
    throw Error(ErrorKind::Usage, "symbol '" + symbol + "' is not a C identifier");
  std::ostringstream o;
  o << "/* Generated by `kiln package-source` from the kernel project " << name_ << " " << version_
    << ". Do not edit. */\n#include <kiln/package.h>\n\n";
  std::size_t i = 0;
  for (const auto& k : kernels_) {
    o << "static const char* const kiln_p" << i << "[] = {";
    for (const auto& s : k.params) o << c_literal(s) << ", ";
    o << "0};\nstatic const char* const kiln_e" << i << "[] = {";
    for (const auto& s : k.entries) o << c_literal(s) << ", ";
    o << "0};\n";
    ++i;
  }
  o << "static const kiln_package_kernel kiln_kernels[] = {\n";
  i = 0;
  for (const auto& k : kernels_) {
    o << "  {" << c_literal(k.uri) << ", " << c_literal(k.family) << ", kiln_p" << i << ", "
      << k.params.size() / 2 << ", kiln_e" << i << ", " << k.entries.size() << ", "
      << c_literal(k.source_hash) << "},\n";
    ++i;
  }
  o << "};\n";
  i = 0;
  for (const auto& [path, bytes] : files_) {
    o << "static const char kiln_f" << i << "[] =\n    " << c_literal(bytes) << ";\n";
    ++i;
  }
  o << "static const kiln_package_file kiln_files[] = {\n";
  i = 0;
  for (const auto& [path, bytes] : files_) {
    o << "  {" << c_literal(path) << ", kiln_f" << i << ", " << bytes.size() << "},\n";
    ++i;
  }
  o << "};\nstatic const kiln_package kiln_package_description = {\n  KILN_PACKAGE_ABI_VERSION, "
    << c_literal(name_) << ", " << c_literal(version_) << ",\n  kiln_kernels, " << kernels_.size()
    << ", kiln_files, " << files_.size() << "};\n\n"
    << "#ifdef __cplusplus\nextern \"C\"\n#endif\n"
    << "#if defined(__GNUC__)\n__attribute__((visibility(\"default\")))\n#endif\n"
    << "const kiln_package* " << symbol << "(void) { return &kiln_package_description; }\n";
  return o.str();
}

void Package::refuse(const std::string& what) {
  throw Error(ErrorKind::Usage, "package description refused: " + what +
                                    " (descriptions are generated by kiln_add_kernel_package; "
                                    "docs/packages.md)");
}

Package::Package(const kiln_package* d) : desc_(d) {
  if (!d) refuse("null pointer");
  if (d->abi_version != KILN_PACKAGE_ABI_VERSION)
    refuse("abi_version " + std::to_string(d->abi_version) + ", this libkiln reads " +
           std::to_string(KILN_PACKAGE_ABI_VERSION) + " (regenerate it with this kiln)");
  if (!d->name || !format::is_package_name(d->name))
    refuse(std::string("name '") + (d->name ? d->name : "(null)") + "': " + format::kPackageNameRule);
  if (!d->version || !format::is_package_version(d->version))
    refuse(std::string("version '") + (d->version ? d->version : "(null)") +
           "' is not MAJOR.MINOR.PATCH[-prerelease]");
  name_ = d->name;
  version_ = d->version;
  if (d->kernel_count && !d->kernels) refuse("kernels is null");
  if (d->file_count && !d->files) refuse("files is null");
  for (std::size_t i = 0; i < d->file_count; ++i)
    if (!d->files[i].path || (d->files[i].size && !d->files[i].data))
      refuse("file " + std::to_string(i) + " has a null field");
}

void Package::check_kernel(std::size_t i) const {
  const kiln_package_kernel& k = desc_->kernels[i];
  if (!k.uri || !k.family || !k.source_hash || (k.param_pairs && !k.params) ||
      (k.entry_count && !k.entries))
    refuse("kernel " + std::to_string(i) + " has a null field");
  if (i == 0) return;
  const char* before = desc_->kernels[i - 1].uri;
  if (!before) refuse("kernel " + std::to_string(i - 1) + " has a null field");
  if (std::strcmp(before, k.uri) >= 0)
    refuse(std::string("kernels not sorted by uri at '") + k.uri + "'");
}

void Package::check_all_kernels() const {
  std::call_once(all_checked_, [&] {
    for (std::size_t i = 0; i < desc_->kernel_count; ++i) check_kernel(i);
  });
}

std::optional<std::size_t> Package::rank(std::string_view uri) const {
  const kiln_package_kernel* begin = desc_->kernels;
  const kiln_package_kernel* end = begin + desc_->kernel_count;
  const kiln_package_kernel* it =
      std::lower_bound(begin, end, uri, [&](const kiln_package_kernel& k, std::string_view u) {
        if (!k.uri) refuse("kernel " + std::to_string(&k - begin) + " has a null field");
        return std::string_view(k.uri) < u;
      });
  if (it == end || std::string_view(it->uri) != uri) return std::nullopt;
  return static_cast<std::size_t>(it - begin);
}

const kiln_package_kernel* Package::kernel(std::string_view uri) const {
  const std::optional<std::size_t> i = rank(uri);
  if (!i) {
    // A miss is believed only of a table in order throughout (a search in one that is not can
    // miss what it holds): checked whole, once.
    check_all_kernels();
    return nullptr;
  }
  check_kernel(*i);
  if (*i + 1 < desc_->kernel_count) check_kernel(*i + 1);
  return desc_->kernels + *i;
}

const Specialisation* Package::spec(std::string_view uri) const {
  const kiln_package_kernel* it = kernel(uri);
  if (!it) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = specs_[it];
  if (!slot) {
    auto s = std::make_unique<Specialisation>();
    s->uri = it->uri;
    s->family = it->family;
    for (std::size_t i = 0; i < it->param_pairs; ++i)
      s->params.emplace_back(it->params[2 * i], it->params[2 * i + 1]);
    s->entries.assign(it->entries, it->entries + it->entry_count);
    s->source_hash = it->source_hash;
    slot = std::move(s);
  }
  return slot.get();
}

std::vector<std::string> Package::uris() const {
  check_all_kernels();
  std::vector<std::string> out;
  out.reserve(desc_->kernel_count);
  for (std::size_t i = 0; i < desc_->kernel_count; ++i) out.emplace_back(desc_->kernels[i].uri);
  return out;
}

const Registry& Package::registry() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!registry_) {
    std::string origin = "registry/kernels.json of package " + name_ + " " + version_;
    const kiln_package_file* reg = nullptr;
    for (std::size_t i = 0; i < desc_->file_count; ++i)
      if (std::strcmp(desc_->files[i].path, "registry/kernels.json") == 0) reg = &desc_->files[i];
    if (!reg)
      throw Error(ErrorKind::Format, "package " + name_ + " " + version_ +
                                         " carries no registry/kernels.json (regenerate it)");
    auto r =
        std::make_unique<Registry>(parse_registry(std::string_view(reg->data, reg->size), origin));
    compute_source_hashes(*r, PackageSourceTree(desc_));
    registry_ = std::move(r);
  }
  return *registry_;
}

std::shared_ptr<const SourceTree> Package::sources() const {
  return std::make_shared<PackageSourceTree>(desc_);
}

std::string Package::library_path() const {
  Dl_info info{};
  if (!::dladdr(static_cast<const void*>(desc_), &info) || !info.dli_fname) return "";
  return info.dli_fname;
}

std::optional<std::string> PackageSourceTree::read(const std::string& relpath) const {
  std::string want = "kernels/" + relpath;
  for (std::size_t i = 0; i < desc_->file_count; ++i)
    if (want == desc_->files[i].path)
      return std::string(desc_->files[i].data, desc_->files[i].size);
  return std::nullopt;
}

std::string PackageSourceTree::describe() const {
  return std::string("sources of package ") + desc_->name + " " + desc_->version;
}

}  // namespace kiln::project
