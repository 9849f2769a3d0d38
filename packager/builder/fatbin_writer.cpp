// The fatbin container around one image (fatbin_writer.hpp has the layout).
#include "builder/fatbin_writer.hpp"

#include <cstdint>
#include <optional>

#include "format/fatbin.hpp"
#include "kiln/error.hpp"

namespace kiln::builder {

namespace {

constexpr std::uint64_t kFlags64BitLinux = 0x11;
constexpr std::uint64_t kFlagArchSpecific = 0x100000;
constexpr std::uint64_t kFlagFamily = 0x200000;
constexpr std::uint64_t kFlagCompatAttributes = 0x1000000;

void put(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

std::uint64_t suffix_flags(const format::Target& t) {
  return t.suffix == 'a' ? kFlagArchSpecific : t.suffix == 'f' ? kFlagFamily : 0;
}

// The bytes after the 64-byte entry header when it has options: u32 0x48, u32 the attributes'
// size, a zero byte and the attributes, zeros up to a 16-byte entry header.
std::string options_block(const std::string& attributes) {
  std::string out;
  put(out, 0x48, 4);
  put(out, attributes.size(), 4);
  if (!attributes.empty()) out += '\0' + attributes;
  while ((64 + out.size()) % 16 != 0) out += '\0';
  return out;
}

// One container of one entry: `kind` 1 PTX or 2 ELF, `extra` the bytes between the 64-byte
// entry header and the payload.
std::string container(int kind, const std::string& extra, std::uint32_t options_offset,
                      std::uint64_t flags, int minor, int major, const format::Target& t,
                      std::string payload) {
  while (payload.size() % 8 != 0) payload += '\0';
  const std::uint64_t entry_header = 64 + extra.size();
  std::string out;
  put(out, format::kFatbinMagic, 4);
  put(out, 1, 2);
  put(out, 16, 2);
  put(out, entry_header + payload.size(), 8);
  put(out, static_cast<std::uint64_t>(kind), 2);
  put(out, 0x0101, 2);
  put(out, entry_header, 4);
  put(out, payload.size(), 8);
  put(out, 0, 4);  // compressed size: the image is stored as is
  put(out, options_offset, 4);
  put(out, static_cast<std::uint64_t>(minor), 2);
  put(out, static_cast<std::uint64_t>(major), 2);
  put(out, static_cast<std::uint64_t>(t.arch), 4);
  put(out, 0, 4);  // name offset
  put(out, 0, 4);  // name length
  put(out, kFlags64BitLinux | suffix_flags(t) | flags, 8);
  put(out, 0, 8);
  put(out, 0, 8);  // decompressed size: not compressed
  out += extra;
  out += payload;
  return out;
}

}  // namespace

std::string fatbin_of_cubin(std::string_view cubin, const format::Target& target) {
  if (target.kind != format::Target::Kind::Sass)
    throw Error(ErrorKind::Internal, "a cubin wrapped for the PTX target " + target.str());
  // elf_sm_arch checks it is an ELF64 at all; EI_ABIVERSION (byte 8) is the entry's minor.
  int sm = format::elf_sm_arch(cubin);
  if (sm != target.arch)
    throw Error(ErrorKind::Format, "the cubin for " + target.str() + " is for sm_" +
                                       std::to_string(sm));
  int abi = static_cast<unsigned char>(cubin[8]);
  // A cubin with compatibility attributes (.nv.compat: ptxas writes it for sm_100 and newer)
  // has them copied into the entry's options, as fatbinary does.
  std::optional<std::string> compat = format::elf_section(cubin, ".nv.compat");
  if (compat && !compat->empty())
    return container(2, options_block(*compat), 64, kFlagCompatAttributes, abi, 1, target,
                     std::string(cubin));
  return container(2, "", 0, 0, abi, 1, target, std::string(cubin));
}

std::string fatbin_of_ptx(std::string_view ptx, const format::Target& target) {
  if (target.kind != format::Target::Kind::Ptx)
    throw Error(ErrorKind::Internal, "PTX wrapped for the SASS target " + target.str());
  // ".version 8.8": the PTX ISA the entry header names.
  int major = -1, minor = -1;
  for (std::size_t at = ptx.find(".version"); at != std::string_view::npos;
       at = ptx.find(".version", at + 1)) {
    if (at != 0 && ptx[at - 1] != '\n') continue;
    std::size_t i = at + 8;
    while (i < ptx.size() && (ptx[i] == ' ' || ptx[i] == '\t')) ++i;
    int ma = 0, mi = 0, digits = 0;
    while (i < ptx.size() && ptx[i] >= '0' && ptx[i] <= '9') ma = ma * 10 + (ptx[i++] - '0'), ++digits;
    if (digits == 0 || i >= ptx.size() || ptx[i] != '.') break;
    ++i;
    digits = 0;
    while (i < ptx.size() && ptx[i] >= '0' && ptx[i] <= '9') mi = mi * 10 + (ptx[i++] - '0'), ++digits;
    if (digits == 0) break;
    major = ma;
    minor = mi;
    break;
  }
  if (major < 0)
    throw Error(ErrorKind::Format, "the PTX for " + target.str() + " has no .version line");
  std::string text(ptx);
  text += '\0';
  return container(1, options_block(""), 64, 0, minor, major, target, std::move(text));
}

}  // namespace kiln::builder
