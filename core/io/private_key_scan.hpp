#pragma once
// The check that a tree about to be published holds no private key (`kiln mirror stage|sync`,
// `kiln tuf-repo add`; docs/security.md). A file is a private key when its leading bytes hold a
// PEM private key header (`-----BEGIN PRIVATE KEY-----`, `-----BEGIN EC PRIVATE KEY-----`,
// `... ENCRYPTED PRIVATE KEY-----`, `... OPENSSH PRIVATE KEY-----`, ...) or when it is named as
// kiln names a TUF key file (`<64 hex>.pem`). Bounded: at most kMaxPublishScanFiles files,
// kPublishScanHeadBytes read of each (docs/security.md, "Limits"). Symbolic links to files are followed (a
// static server follows them); links to directories are not descended.
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::io {

// Files looked at, and the leading bytes read of each (a PEM key starts with its header). A
// tree with more files is refused with Error{Limit}: it cannot be said to hold no key.
constexpr std::size_t kMaxPublishScanFiles = 100000;
constexpr std::size_t kPublishScanHeadBytes = std::size_t{64} << 10;

// Pure: `head` holds "-----BEGIN " then up to 40 letters and spaces then "PRIVATE KEY-----".
bool holds_private_key_header(std::string_view head);
// Pure: `name` is <64 lowercase hex>.pem, the file name of a key `kiln tuf-repo` writes.
bool is_tuf_key_file_name(std::string_view name);

// The first private key file under `roots` (files, or directories walked in name order); roots
// that do not exist are skipped. Throws Error{Limit} past the file bound, Error{Io} on a file
// that cannot be read.
std::optional<std::filesystem::path> find_private_key(
    const std::vector<std::filesystem::path>& roots);

// Throws Error{Usage} (field `path`: the key file) when find_private_key finds one:
// "<what>: <file> is a private key and <publishing>; nothing was published. Move the key out
// ...". `publishing` says where it would go ("would be served from /srv/mirror").
void refuse_private_key_in(const std::vector<std::filesystem::path>& roots, const std::string& what,
                           const std::string& publishing);

}  // namespace kiln::io
