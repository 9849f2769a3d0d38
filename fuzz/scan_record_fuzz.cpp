// The scan record (core/store/scan_record.hpp): a file in the loader's cache directory that a
// later process trusts for a store's listing. The file can be forged or corrupted, so over any
// bytes: parse_scan_record never crashes; what it accepts is for the asked package and store, its
// names are archive directory names of the package, sorted and unique, and format_scan_record
// gives a text that parses back to the same record.
//
// (Until format 2 a record also held each manifest's layout, and this target fuzzed the reader
// that trusted it; ManifestEntries::open, which needs no layout, is fuzzed by
// manifest_entry_fuzz.cpp.)
//
//   scan_record_fuzz --write-seeds=DIR    writes the seeds of fuzz/corpus/scan_record/ to DIR
//                                         (fuzz/corpus/make_seeds.sh) and exits
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_util.hpp"
#include "store/scan_record.hpp"
#include "store/store_scan.hpp"

namespace {

using namespace kiln;

const std::string kPackage = "kiln-kernels";
const std::string kStore = "/srv/kiln/store";

void check_record(const store::ScanRecord& r) {
  if (r.package != kPackage || r.store != kStore)
    fuzz::finding("accepted a record for '" + r.package + "' at '" + r.store + "'");
  for (std::size_t i = 0; i < r.names.size(); ++i) {
    if (!store::is_archive_dir_name(r.names[i], kPackage))
      fuzz::finding("accepted the name '" + r.names[i] + "'");
    if (i > 0 && !(r.names[i - 1] < r.names[i]))
      fuzz::finding("names not sorted and unique at '" + r.names[i] + "'");
  }
  std::optional<std::string> text = store::format_scan_record(r);
  if (!text) fuzz::finding("format_scan_record refuses an accepted record");
  std::optional<store::ScanRecord> back = store::parse_scan_record(*text, kPackage, kStore);
  if (!back || !(*back == r)) fuzz::finding("the formatted record does not read back:\n" + *text);
}

store::ScanRecord seed_record(std::vector<std::string> names) {
  store::ScanRecord r;
  r.package = kPackage;
  r.store = kStore;
  r.dir = {2049, 1310721, 4096, 1700000000123456789, 1700000000123456789};
  r.names = std::move(names);
  return r;
}

void write_seeds(const std::string& dir) {
  const std::vector<std::string> names = {"kiln-kernels-0.1.0-cuda13.0-compute_80",
                                          "kiln-kernels-0.1.0-cuda13.0-sm_80",
                                          "kiln-kernels-0.1.0-cuda13.0-sm_90a"};
  const std::vector<std::pair<std::string, std::string>> seeds = {
      {"record-names-only", store::format_scan_record(seed_record(names)).value()},
      {"record-empty-store", store::format_scan_record(seed_record({})).value()},
  };
  for (const auto& [name, bytes] : seeds) {
    std::ofstream out(dir + "/" + name, std::ios::binary);
    out << bytes;
    if (!out.flush()) fuzz::finding("cannot write " + dir + "/" + name);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  const std::string flag = "--write-seeds=";
  for (int i = 1; i < *argc; ++i) {
    std::string_view arg = (*argv)[i];
    if (arg.compare(0, flag.size(), flag) == 0) {
      write_seeds(std::string(arg.substr(flag.size())));
      std::exit(0);
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::optional<store::ScanRecord> record = store::parse_scan_record(fuzz::as_text(data, size), kPackage, kStore);
  if (record) check_record(*record);
  return 0;
}
