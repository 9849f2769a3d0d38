#pragma once
// What a build of libkiln accepts: its version, the formats it reads and the source hash it
// expects for each kernel. Read from the libkiln linked into this process, or from another
// build opened with dlopen (`kiln compat --loader LIB`, `kiln tarball` checking what it packs),
// through the C ABI facts in kiln/kiln.h.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

namespace kiln::cli {

struct LoaderFacts {
  std::string library;       // path of the shared library the facts came from
  std::string version;       // "0.1.0"
  std::string cuda_version;  // "13.0"
  int manifest_format = 0;
  int index_format = 0;
  // nullopt: that libkiln's registry has no such URI.
  std::optional<std::string> source_hash(const std::string& uri) const;

  using SourceHashFn = const char* (*)(const char*);
  SourceHashFn source_hash_fn = nullptr;
  std::shared_ptr<void> handle;  // keeps a dlopen'ed library open while the facts live
};

// The libkiln this process runs with.
LoaderFacts this_loader_facts();
// Another build of libkiln. Error{NotFound} when the file is missing, Error{Unsupported} when it
// does not load or lacks one of the symbols (each missing symbol named).
LoaderFacts open_loader_facts(const std::filesystem::path& library);

}  // namespace kiln::cli
