#include "plan/memory_store.hpp"

#include <memory>

#include "format/manifest.hpp"
#include "kiln/error.hpp"

namespace kiln::plan {

MemoryStore memory_store(fetch::FetchedArchive archive) {
  MemoryStore out;
  out.scan.dir = archive.url;
  out.scan.source = "mirror, in memory";
  out.scan.readable = true;
  store::StoreArchive a;
  a.dir = archive.url;
  try {
    if (archive.members.empty() || archive.members.front().name != "manifest.json")
      throw Error(ErrorKind::Format, "its first member is not manifest.json");
    a.manifest = std::make_shared<const format::Manifest>(
        format::parse_manifest(archive.members.front().data, archive.url + "/manifest.json"));
  } catch (const Error& e) {
    a.error_kind = e.kind();
    a.error = e.what();
  }
  for (auto& m : archive.members)
    if (m.name != "manifest.json") out.files[archive.url + "/" + m.name] = std::move(m.data);
  out.scan.archives.push_back(std::move(a));
  return out;
}

}  // namespace kiln::plan
