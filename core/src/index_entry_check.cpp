// The manifest-against-index check, and the manifest read it needs before anything is unpacked.
#include "index_entry_check.hpp"

#include <cerrno>

#include "kiln/error.hpp"
#include "lazy_libs.hpp"

namespace kiln {

namespace fs = std::filesystem;

namespace {
// Archives carry their manifest first, under this name (manifests/README.md).
constexpr const char* kLeadingManifestName = "manifest.json";
}  // namespace

std::vector<ManifestIndexMismatch> manifest_index_mismatches(const Manifest& manifest,
                                                             const IndexEntry& entry,
                                                             const Index& index) {
  std::vector<ManifestIndexMismatch> out;
  auto compare = [&](ErrorKind kind, const char* field, const std::string& in_manifest,
                     const std::string& in_index) {
    if (in_manifest != in_index) out.push_back({kind, field, in_manifest, in_index});
  };
  compare(ErrorKind::Integrity, "target", manifest.target, entry.target);
  compare(ErrorKind::Stale, "package_version", manifest.package_version, index.package_version);
  compare(ErrorKind::Stale, "cuda_version", manifest.cuda_version, index.cuda_version);
  return out;
}

std::vector<VerifyProblem> manifest_index_problems(const Manifest& manifest,
                                                   const IndexEntry& entry, const Index& index,
                                                   const std::string& archive_origin,
                                                   const std::string& index_origin) {
  std::vector<VerifyProblem> problems;
  for (const auto& m : manifest_index_mismatches(manifest, entry, index))
    problems.push_back({m.kind, archive_origin, m.field,
                        archive_origin + ": manifest " + m.field + " is " + m.in_manifest + ", " +
                            index_origin + " says " + m.in_index});
  return problems;
}

void require_manifest_matches_index(const Manifest& manifest, const IndexEntry& entry,
                                    const Index& index, const std::string& archive_origin,
                                    const std::string& index_origin, const std::string& action) {
  std::vector<VerifyProblem> problems =
      manifest_index_problems(manifest, entry, index, archive_origin, index_origin);
  if (problems.empty()) return;
  std::string msg = "refusing to " + action + " " + archive_origin +
                    ": its manifest disagrees with " + index_origin + ", which pins its bytes:";
  for (const auto& p : problems) msg += "\n  " + p.message;
  // The fields of the first (in rule order) mismatch of the most severe kind, so a caller reads
  // which field and both values without parsing the message.
  const ErrorKind kind = *most_severe(problems);
  std::vector<ErrorField> fields = {{"path", archive_origin}, {"index", index_origin}};
  for (const auto& m : manifest_index_mismatches(manifest, entry, index))
    if (m.kind == kind) {
      fields.push_back({"field", m.field});
      fields.push_back({"actual", m.in_manifest});
      fields.push_back({"expected", m.in_index});
      break;
    }
  throw Error(kind, msg, std::move(fields));
}

std::optional<Manifest> read_leading_manifest(const fs::path& archive) {
  const std::string where = archive.string();
  std::error_code ec;
  if (!fs::exists(archive, ec)) throw Error(ErrorKind::NotFound, "archive not found: " + where);
  if (!fs::is_regular_file(archive, ec)) throw Error(ErrorKind::Io, "not a regular file: " + where);
  const lazy_libs::ArchiveApi& la = lazy_libs::archive("reading the manifest of " + where);
  lazy_libs::ReadHandle a(la.read_new(), {&la});
  if (!a) throw Error(ErrorKind::Internal, "libarchive: archive_read_new failed");
  if (la.read_support_filter_zstd(a.get()) != ARCHIVE_OK ||
      la.read_support_format_tar(a.get()) != ARCHIVE_OK)
    throw Error(ErrorKind::Internal,
                "libarchive cannot read zstd-compressed tar here: " + la.error_text(a.get()));
  if (la.read_open_filename(a.get(), archive.c_str(), 1 << 16) != ARCHIVE_OK) {
    int err = la.error_number(a.get());
    ErrorKind kind =
        (err == EACCES || err == EIO || err == EISDIR) ? ErrorKind::Io : ErrorKind::Format;
    throw Error(kind, "cannot open archive " + where + ": " + la.error_text(a.get()));
  }
  archive_entry* e = nullptr;
  if (la.read_next_header(a.get(), &e) != ARCHIVE_OK) return std::nullopt;
  const char* raw = la.entry_pathname(e);
  if (!raw || std::string(raw) != kLeadingManifestName || la.entry_filetype(e) != AE_IFREG)
    return std::nullopt;
  const std::string origin = where + ":" + kLeadingManifestName;
  if (la.entry_size_is_set(e) &&
      static_cast<std::uint64_t>(la.entry_size(e)) > kMaxLeadingManifestBytes)
    throw Error(ErrorKind::Format, origin + ": declares " + std::to_string(la.entry_size(e)) +
                                       " bytes, more than the limit of " +
                                       std::to_string(kMaxLeadingManifestBytes));
  std::string data;
  char buf[1 << 16];
  for (;;) {
    la_ssize_t n = la.read_data(a.get(), buf, sizeof buf);
    if (n == 0) break;
    if (n < 0)
      throw Error(ErrorKind::Format, origin + ": cannot read data: " + la.error_text(a.get()));
    if (data.size() + static_cast<std::size_t>(n) > kMaxLeadingManifestBytes)
      throw Error(ErrorKind::Format, origin + ": larger than the limit of " +
                                         std::to_string(kMaxLeadingManifestBytes) + " bytes");
    data.append(buf, static_cast<std::size_t>(n));
  }
  return parse_manifest(data, origin);
}

}  // namespace kiln
