// Checking one compile result before it is packed: the image is of the artifact's target and
// holds every registry entry (build.hpp: check_compile_result).
#include <string>
#include <vector>

#include "builder/build.hpp"
#include "format/fatbin.hpp"
#include "kiln/error.hpp"

namespace kiln::builder {

namespace {

std::string image_symbols_error(const std::string& path, const format::Target& t, const std::string& what) {
  return path + ": built for " + t.str() + " but " + what;
}

// Checks the fatbin holds exactly the one image that was asked for, and returns the kernel
// symbols of that image: never ship an image of another arch than the archive's target.
std::vector<std::string> image_symbols(const std::string& bytes, const std::string& path,
                                       const format::Target& t) {
  std::vector<format::FatbinImage> images = format::parse_fatbin(bytes, path);
  bool want_ptx = t.kind == format::Target::Kind::Ptx;
  std::vector<std::string> symbols;
  int matching = 0;
  for (const auto& img : images) {
    bool is_ptx = img.kind == format::FatbinImage::Kind::Ptx;
    if (is_ptx != want_ptx || img.arch != t.arch || img.suffix != t.suffix)
      throw Error(ErrorKind::Format,
                  image_symbols_error(path, t, "it holds an image for " + img.target()));
    ++matching;
    std::string payload = format::fatbin_image_payload(bytes, img);
    if (!is_ptx && format::elf_sm_arch(payload) != t.arch)
      throw Error(ErrorKind::Format,
                  image_symbols_error(path, t,
                                      "its cubin says sm_" + std::to_string(format::elf_sm_arch(payload))));
    auto syms = is_ptx ? format::ptx_entry_names(payload) : format::elf_function_symbols(payload);
    symbols.insert(symbols.end(), syms.begin(), syms.end());
  }
  if (matching == 0)
    throw Error(ErrorKind::Format, image_symbols_error(path, t, "it holds no image"));
  return symbols;
}

}  // namespace

std::vector<format::ArtifactEntry::Entry> check_compile_result(const std::string& bytes,
                                                       const std::string& path,
                                                       const std::string& uri, const format::Target& t,
                                                       const std::vector<std::string>& entries) {
  try {
    return match_entries(entries, image_symbols(bytes, path, t), format::demangled_base_name, uri, t.str());
  } catch (const Error& e) {
    throw Error(e.kind(), "compile result of " + uri + " for " + t.str() +
                              " is not what was asked for, so it is not packed (a corrupt "
                              "compiler-launcher cache entry?): " +
                              e.what());
  }
}

}  // namespace kiln::builder
