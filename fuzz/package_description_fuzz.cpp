// read_package_description (core/project/package_description.cpp) over any bytes: a
// <name>-<version>.package.json beside a store, which a node reads without the project. Refusals
// are typed; an accepted description is one the loader accepts too (Package), and writing it
// again and reading that back gives the same bytes.
#include "fuzz_util.hpp"
#include "project/package.hpp"
#include "project/package_description.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kiln;
  const std::string origin = "fuzz.package.json";
  std::unique_ptr<project::PackageData> d;
  if (!fuzz::refuses_cleanly(
          [&] { d = project::read_package_description(fuzz::as_text(data, size), origin); },
          {ErrorKind::Format, ErrorKind::Stale, ErrorKind::Limit, ErrorKind::Integrity}, origin))
    return 0;
  std::string canonical;
  // A name expression or parameter may hold bytes that are not UTF-8 only if the input's JSON
  // string did, which nlohmann refuses: writing an accepted description never fails.
  if (!fuzz::refuses_cleanly([&] { canonical = project::package_description_json(*d->get()); }, {}))
    return 0;
  std::unique_ptr<project::PackageData> again;
  if (!fuzz::refuses_cleanly([&] { again = project::read_package_description(canonical, "canonical"); },
                             {}))
    return 0;
  if (project::package_description_json(*again->get()) != canonical)
    fuzz::finding("package_description_json(read(x)) is not stable:\n" + canonical.substr(0, 400));
  // Uniqueness and order of URIs are the reader's promise to the loader's binary search.
  for (std::size_t i = 1; i < d->get()->kernel_count; ++i)
    if (std::string(d->get()->kernels[i - 1].uri) >= d->get()->kernels[i].uri)
      fuzz::finding("kernels not strictly sorted after a read");
  return 0;
}
