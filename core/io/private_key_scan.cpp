#include "io/private_key_scan.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>

#include "kiln/error.hpp"

namespace kiln::io {

namespace fs = std::filesystem;

bool holds_private_key_header(std::string_view head) {
  constexpr std::string_view begin = "-----BEGIN ";
  constexpr std::string_view end = "PRIVATE KEY-----";
  for (auto at = head.find(begin); at != std::string_view::npos; at = head.find(begin, at + 1)) {
    std::string_view label = head.substr(at + begin.size(), 40 + end.size());
    auto p = label.find(end);
    if (p != std::string_view::npos && std::all_of(label.begin(), label.begin() + p, [](char c) {
          return std::isupper(static_cast<unsigned char>(c)) || c == ' ';
        }))
      return true;
  }
  return false;
}

bool is_tuf_key_file_name(std::string_view name) {
  constexpr std::string_view ext = ".pem";
  if (name.size() != 64 + ext.size() || name.substr(64) != ext) return false;
  return std::all_of(name.begin(), name.begin() + 64,
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

namespace {

std::string read_head(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(ErrorKind::Io, "cannot read " + file.string(), {{"path", file.string()}});
  std::string head(kPublishScanHeadBytes, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  if (in.bad())
    throw Error(ErrorKind::Io, "reading " + file.string() + " failed", {{"path", file.string()}});
  head.resize(static_cast<std::size_t>(in.gcount()));
  return head;
}

}  // namespace

std::optional<fs::path> find_private_key(const std::vector<fs::path>& roots) {
  std::vector<fs::path> files;
  auto add = [&](const fs::path& file, const fs::path& root) {
    if (files.size() >= kMaxPublishScanFiles)
      throw Error(ErrorKind::Limit,
                  "more than " + std::to_string(kMaxPublishScanFiles) +
                      " files to check for private keys under " + root.string() +
                      ": a tree this large is not published (docs/security.md)",
                  {{"path", root.string()}});
    files.push_back(file);
  };
  for (const auto& root : roots) {
    std::error_code ec;
    if (fs::is_regular_file(root, ec)) {
      add(root, root);
      continue;
    }
    if (!fs::is_directory(root, ec)) continue;
    std::size_t first = files.size();
    for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code broken;                                  // a dangling link serves nothing
      if (it->is_regular_file(broken)) add(it->path(), root);  // follows a link to a file
    }
    if (ec)
      throw Error(ErrorKind::Io, "cannot list " + root.string() + ": " + ec.message(),
                  {{"path", root.string()}});
    std::sort(files.begin() + static_cast<std::ptrdiff_t>(first), files.end());
  }
  // Names first: kiln's own key files are found without reading anything.
  for (const auto& f : files)
    if (is_tuf_key_file_name(f.filename().string())) return f;
  for (const auto& f : files)
    if (holds_private_key_header(read_head(f))) return f;
  return std::nullopt;
}

void refuse_private_key_in(const std::vector<fs::path>& roots, const std::string& what,
                           const std::string& publishing) {
  auto key = find_private_key(roots);
  if (!key) return;
  throw Error(ErrorKind::Usage,
              what + ": " + key->string() + " is a private key (a PEM private key header, or " +
                  "the name of a kiln TUF key file) and " + publishing +
                  "; nothing was published. Move the key out of every directory a server "
                  "publishes (TUF keys: `kiln tuf-repo --keys-dir`, docs/tuf.md), and replace "
                  "it if it may already have been served.",
              {{"path", key->string()}});
}

}  // namespace kiln::io
