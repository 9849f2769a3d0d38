#pragma once
// An archive the mirror tier fetched into memory (fetch::FetchedArchive: its cache directory could
// not be written), seen as a store of one archive directory, so the one ranking (plan_stores) and
// the one artifact check (verify_artifact) judge it as they judge an archive unpacked on disk.
#include <map>
#include <string>

#include "fetch/fetch.hpp"
#include "plan/store_scanner.hpp"

namespace kiln::plan {

struct MemoryStore {
  // dir: the archive's URL; one archive, its manifest parsed (fetch checked it against the index
  // entry), or the reason it cannot be read.
  StoreScan scan;
  // Each artifact's bytes by the path plan_stores gives its candidate (<url>/<file>).
  std::map<std::string, std::string> files;
};

// Never throws: a manifest that does not parse is the archive's error, as a store scan reports one.
MemoryStore memory_store(fetch::FetchedArchive archive);

}  // namespace kiln::plan
