// The manifest-against-index check, and the manifest read it needs before anything is unpacked.
#include "store/index_entry_check.hpp"

#include "format/archive_stream.hpp"
#include "io/limits.hpp"
#include "kiln/error.hpp"
#include "runtime/lazy_libs.hpp"

namespace kiln::store {

namespace fs = std::filesystem;

namespace {
// Archives carry their manifest first, under this name (manifests/README.md).
constexpr const char* kLeadingManifestName = "manifest.json";
}  // namespace

std::vector<ManifestIndexMismatch> manifest_index_mismatches(const format::Manifest& manifest,
                                                             const format::IndexEntry& entry,
                                                             const format::Index& index) {
  std::vector<ManifestIndexMismatch> out;
  auto compare = [&](ErrorKind kind, const char* field, const std::string& in_manifest,
                     const std::string& in_index) {
    if (in_manifest != in_index) out.push_back({kind, field, in_manifest, in_index});
  };
  compare(ErrorKind::Integrity, "target", manifest.target, entry.target);
  compare(ErrorKind::Stale, "package", manifest.package, index.package);
  compare(ErrorKind::Stale, "package_version", manifest.package_version, index.package_version);
  compare(ErrorKind::Stale, "cuda_version", manifest.cuda_version, entry.cuda_version);
  return out;
}

std::vector<VerifyProblem> manifest_index_problems(const format::Manifest& manifest,
                                                   const format::IndexEntry& entry, const format::Index& index,
                                                   const std::string& archive_origin,
                                                   const std::string& index_origin) {
  std::vector<VerifyProblem> problems;
  for (const auto& m : manifest_index_mismatches(manifest, entry, index))
    problems.push_back({m.kind, archive_origin, m.field,
                        archive_origin + ": manifest " + m.field + " is " + m.in_manifest + ", " +
                            index_origin + " says " + m.in_index});
  return problems;
}

void require_manifest_matches_index(const format::Manifest& manifest, const format::IndexEntry& entry,
                                    const format::Index& index, const std::string& archive_origin,
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

std::optional<format::Manifest> read_leading_manifest(const fs::path& archive) {
  const std::string where = archive.string();
  std::error_code ec;
  if (!fs::exists(archive, ec)) throw Error(ErrorKind::NotFound, "archive not found: " + where);
  // libarchive named for this use when it is missing (the stream would say "unpacking").
  runtime::lazy_libs::archive("reading the manifest of " + where);
  // The archive stream install_archive reads with: the same header checks and limits, so an
  // archive is refused here in the words and kinds the install would use. Only the first member
  // is read; nothing else is decompressed.
  format::ArchiveStream r = format::ArchiveStream::open_file(archive);
  auto first = r.next();
  if (!first || first->name != kLeadingManifestName) return std::nullopt;
  const std::string origin = where + ":" + kLeadingManifestName;
  if (first->size > io::limits::kMaxManifestBytes)
    throw Error(ErrorKind::Limit, origin + ": declared size " + std::to_string(first->size) +
                                      " exceeds the limit of " +
                                      std::to_string(io::limits::kMaxManifestBytes) +
                                      " (docs/security.md)");
  return format::parse_manifest(r.read_data_whole(io::limits::kMaxManifestBytes), origin);
}

}  // namespace kiln::store
