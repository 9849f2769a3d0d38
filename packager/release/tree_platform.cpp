#include "release/tree_platform.hpp"

#include <array>
#include <cstdint>
#include <fstream>
#include <regex>
#include <sstream>

#include "kiln/error.hpp"

namespace kiln::release {

namespace fs = std::filesystem;

std::string elf_platform(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(ErrorKind::Io, "cannot read " + file.string());
  std::array<unsigned char, 20> h{};
  in.read(reinterpret_cast<char*>(h.data()), static_cast<std::streamsize>(h.size()));
  if (in.gcount() != static_cast<std::streamsize>(h.size()) || h[0] != 0x7f || h[1] != 'E' ||
      h[2] != 'L' || h[3] != 'F')
    throw Error(ErrorKind::Format, file.string() + " is not an ELF file");
  // e_ident[EI_CLASS] 2: 64-bit; e_ident[EI_DATA] 1: little-endian; e_machine at byte 18.
  if (h[4] != 2 || h[5] != 1)
    throw Error(ErrorKind::Format, file.string() + " is not a 64-bit little-endian ELF file (class " +
                                       std::to_string(h[4]) + ", data " + std::to_string(h[5]) + ")");
  const unsigned machine = h[18] | (static_cast<unsigned>(h[19]) << 8);
  if (machine == 62) return "linux-x86_64";   // EM_X86_64
  if (machine == 183) return "linux-aarch64";  // EM_AARCH64
  throw Error(ErrorKind::Format, file.string() + " is built for ELF machine " +
                                     std::to_string(machine) +
                                     ": kiln ships for x86_64 (62) and aarch64 (183) only");
}

LoaderFacts unloaded_loader_facts(const fs::path& prefix, const fs::path& library) {
  LoaderFacts f;
  f.library = library.string();
  const std::string name = library.filename().string();
  static const std::regex versioned(R"(libkiln\.so\.([0-9]+\.[0-9]+\.[0-9]+))");
  std::smatch m;
  if (!std::regex_match(name, m, versioned))
    throw Error(ErrorKind::Format,
                library.string() + " is not named libkiln.so.<major.minor.patch>: its version "
                                   "cannot be read without loading it, and it is built for "
                                   "another host");
  f.version = m[1];
  const fs::path config = prefix / "lib" / "cmake" / "kiln" / "kilnConfig.cmake";
  std::ifstream in(config);
  std::stringstream text;
  text << in.rdbuf();
  static const std::regex cuda(R"re(set\(kiln_CUDA_VERSION "([0-9]+\.[0-9]+)"\))re");
  const std::string s = text.str();
  if (!in || !std::regex_search(s, m, cuda))
    throw Error(ErrorKind::Format, config.string() +
                                       " sets no kiln_CUDA_VERSION \"<major.minor>\": the CUDA "
                                       "version of a libkiln built for another host is read there");
  f.cuda_version = m[1];
  return f;
}

}  // namespace kiln::release
