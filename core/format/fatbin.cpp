#include "format/fatbin.hpp"

#include <cxxabi.h>
#include <zstd.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "kiln/error.hpp"

namespace kiln::format {
namespace {

constexpr std::uint64_t kFlagOldCompression = 0x2000;
constexpr std::uint64_t kFlagZstd = 0x8000;
constexpr std::uint64_t kFlagArchSpecific = 0x100000;
constexpr std::uint64_t kFlagFamily = 0x200000;
constexpr std::uint64_t kContainerHeaderSize = 16;
constexpr std::uint64_t kEntryHeaderMin = 64;
// No single kernel image comes near this; a larger claim is corruption, not a reason to
// allocate.
constexpr std::uint64_t kMaxDecompressed = std::uint64_t{1} << 30;

// Little-endian reads; callers have checked the bounds.
template <typename T>
T load(std::string_view b, std::uint64_t off) {
  T v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i)
    v |= static_cast<T>(static_cast<unsigned char>(b[off + i])) << (8 * i);
  return v;
}

bool fits(std::string_view b, std::uint64_t off, std::uint64_t len) {
  return off <= b.size() && len <= b.size() - off;
}

std::string hex(std::uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

[[noreturn]] void bad(const std::string& origin, std::uint64_t off, const std::string& what) {
  throw Error(ErrorKind::Format,
              origin + ": not a valid fatbin at offset " + std::to_string(off) + ": " + what);
}

[[noreturn]] void bad_elf(const std::string& what) {
  throw Error(ErrorKind::Format, "not a valid cubin (ELF64): " + what);
}


void check_elf_magic(std::string_view elf) {
  if (elf.size() < 64 || elf.substr(0, 4) !=
                             "\x7f"
                             "ELF")
    bad_elf("no ELF magic");
}

// The section header table of a 64-bit little-endian ELF, its bounds checked against the file.
struct SectionTable {
  std::uint64_t offset = 0;
  std::uint16_t entry_size = 0, count = 0;
  std::uint64_t header(std::uint32_t i) const { return offset + std::uint64_t{i} * entry_size; }
};

SectionTable section_table(std::string_view elf) {
  check_elf_magic(elf);
  if (elf[4] != 2) bad_elf("not a 64-bit ELF");
  if (elf[5] != 1) bad_elf("not little-endian");
  SectionTable t{load<std::uint64_t>(elf, 0x28), load<std::uint16_t>(elf, 0x3a),
                 load<std::uint16_t>(elf, 0x3c)};
  if (t.count == 0) return t;
  if (t.entry_size < 64) bad_elf("section header size " + std::to_string(t.entry_size));
  if (t.offset > elf.size() || std::uint64_t{t.count} * t.entry_size > elf.size() - t.offset)
    bad_elf("section headers lie outside the file");
  return t;
}

}  // namespace

std::string FatbinImage::target() const {
  std::string s;
  switch (kind) {
    case Ptx:
      s = "compute_";
      break;
    case Elf:
      s = "sm_";
      break;
    case Other:
      s = "kind" + std::to_string(raw_kind) + "_";
      break;
  }
  s += std::to_string(arch);
  if (suffix) s += suffix;
  return s;
}

bool looks_like_fatbin(std::string_view bytes) {
  return bytes.size() >= 4 && load<std::uint32_t>(bytes, 0) == kFatbinMagic;
}

std::vector<FatbinImage> parse_fatbin(std::string_view b, const std::string& origin) {
  std::vector<FatbinImage> images;
  std::uint64_t off = 0;
  std::size_t container = 0;
  if (b.empty()) bad(origin, 0, "the file is empty");
  while (off < b.size()) {
    if (container > 0) {
      // Anything after a container is another container or zero padding to the end.
      bool rest_zero = true;
      for (std::uint64_t i = off; i < b.size() && rest_zero; ++i) rest_zero = b[i] == 0;
      if (rest_zero) break;
    }
    if (!fits(b, off, kContainerHeaderSize)) bad(origin, off, "truncated container header");
    auto magic = load<std::uint32_t>(b, off);
    if (magic != kFatbinMagic)
      bad(origin, off, "magic is " + hex(magic) + ", expected " + hex(kFatbinMagic));
    auto version = load<std::uint16_t>(b, off + 4);
    auto header_size = load<std::uint16_t>(b, off + 6);
    auto payload_size = load<std::uint64_t>(b, off + 8);
    if (version != 1)
      bad(origin, off, "container version " + std::to_string(version) + " (this kiln reads 1)");
    if (header_size < kContainerHeaderSize || !fits(b, off, header_size))
      bad(origin, off, "container header size " + std::to_string(header_size) + " out of range");
    std::uint64_t start = off + header_size;
    if (!fits(b, start, payload_size))
      bad(origin, off,
          "container payload of " + std::to_string(payload_size) +
              " bytes runs past the end of the file (" + std::to_string(b.size()) + " bytes)");
    std::uint64_t end = start + payload_size;
    std::uint64_t e = start;
    while (e < end) {
      if (end - e < kEntryHeaderMin) bad(origin, e, "truncated entry header");
      FatbinImage img;
      img.raw_kind = load<std::uint16_t>(b, e);
      auto entry_header = load<std::uint32_t>(b, e + 4);
      auto size = load<std::uint64_t>(b, e + 8);
      img.compressed_size = load<std::uint32_t>(b, e + 16);
      img.arch = static_cast<int>(load<std::uint32_t>(b, e + 28));
      img.flags = load<std::uint64_t>(b, e + 40);
      img.decompressed_size = load<std::uint64_t>(b, e + 56);
      if (entry_header < kEntryHeaderMin || entry_header > end - e)
        bad(origin, e, "entry header size " + std::to_string(entry_header) + " out of range");
      if (size > end - e - entry_header)
        bad(origin, e,
            "entry payload of " + std::to_string(size) +
                " bytes runs past the end of its container");
      img.kind = img.raw_kind == 1   ? FatbinImage::Ptx
                 : img.raw_kind == 2 ? FatbinImage::Elf
                                     : FatbinImage::Other;
      img.suffix = (img.flags & kFlagArchSpecific) ? 'a' : (img.flags & kFlagFamily) ? 'f' : 0;
      img.compressed = (img.flags & kFlagZstd) != 0;
      img.old_compression = (img.flags & kFlagOldCompression) != 0;
      img.size = size;
      img.payload_offset = e + entry_header;
      img.container = container;
      if (img.compressed) {
        if (img.compressed_size == 0 || img.compressed_size > size)
          bad(origin, e,
              "compressed size " + std::to_string(img.compressed_size) +
                  " does not fit the payload of " + std::to_string(size) + " bytes");
        if (img.decompressed_size == 0 || img.decompressed_size > kMaxDecompressed)
          bad(origin, e,
              "decompressed size " + std::to_string(img.decompressed_size) + " out of range");
      } else if (!img.old_compression) {
        img.decompressed_size = size;
      }
      images.push_back(img);
      e += entry_header + size;
    }
    off = end;
    ++container;
  }
  return images;
}

std::string fatbin_image_payload(std::string_view b, const FatbinImage& img) {
  const std::string what = img.target() + " image at offset " + std::to_string(img.payload_offset);
  if (!fits(b, img.payload_offset, img.size))
    throw Error(ErrorKind::Format, what + ": payload lies outside the bytes given");
  std::string_view payload = b.substr(img.payload_offset, img.size);
  if (img.old_compression && !img.compressed)
    throw Error(ErrorKind::Unsupported,
                what +
                    " uses the older fatbin compression (flag 0x2000), which kiln cannot "
                    "decompress; rebuild it with CUDA 13 (zstd) or without compression");
  if (!img.compressed) return std::string(payload);
  // Check the frame's own content size before allocating what the header claims.
  unsigned long long frame = ZSTD_getFrameContentSize(payload.data(), img.compressed_size);
  if (frame == ZSTD_CONTENTSIZE_ERROR)
    throw Error(ErrorKind::Format, what + ": payload is not a zstd frame");
  if (frame != ZSTD_CONTENTSIZE_UNKNOWN && frame != img.decompressed_size)
    throw Error(ErrorKind::Format, what + ": zstd frame holds " + std::to_string(frame) +
                                       " bytes, header says " +
                                       std::to_string(img.decompressed_size));
  std::string out(img.decompressed_size, '\0');
  size_t r = ZSTD_decompress(out.data(), out.size(), payload.data(), img.compressed_size);
  if (ZSTD_isError(r))
    throw Error(ErrorKind::Format, what + ": zstd decompression failed: " + ZSTD_getErrorName(r));
  if (r != img.decompressed_size)
    throw Error(ErrorKind::Format, what + ": decompressed to " + std::to_string(r) +
                                       " bytes, header says " +
                                       std::to_string(img.decompressed_size));
  return out;
}

int elf_sm_arch(std::string_view elf) {
  check_elf_magic(elf);
  // Two layouts of e_flags, told apart by EI_OSABI: CUDA 13's cubins (0x41) keep the SM in
  // bits 8-15; CUDA 12's and older (0x33) in bits 0-7 (and the virtual arch in bits 16-23).
  const std::uint32_t flags = load<std::uint32_t>(elf, 0x30);
  if (static_cast<unsigned char>(elf[7]) == 0x41) return static_cast<int>((flags >> 8) & 0xff);
  return static_cast<int>(flags & 0xff);
}

std::optional<std::string> elf_section(std::string_view elf, std::string_view name) {
  const SectionTable table = section_table(elf);
  const std::uint16_t shnum = table.count;
  if (shnum == 0) return std::nullopt;
  auto shstrndx = load<std::uint16_t>(elf, 0x3e);
  if (shstrndx >= shnum) bad_elf("section name table " + std::to_string(shstrndx) + " is missing");
  auto header = [&](std::uint32_t i) { return table.header(i); };
  auto names_off = load<std::uint64_t>(elf, header(shstrndx) + 0x18);
  auto names_size = load<std::uint64_t>(elf, header(shstrndx) + 0x20);
  if (!fits(elf, names_off, names_size)) bad_elf("section name table lies outside the file");
  std::string_view names = elf.substr(names_off, names_size);
  for (std::uint32_t i = 0; i < shnum; ++i) {
    auto name_off = load<std::uint32_t>(elf, header(i));
    if (name_off >= names.size()) bad_elf("section name offset outside the name table");
    std::size_t endp = names.find('\0', name_off);
    if (endp == std::string_view::npos) bad_elf("unterminated section name");
    if (names.substr(name_off, endp - name_off) != name) continue;
    auto type = load<std::uint32_t>(elf, header(i) + 4);
    auto offset = load<std::uint64_t>(elf, header(i) + 0x18);
    auto size = load<std::uint64_t>(elf, header(i) + 0x20);
    if (type == 8 /* SHT_NOBITS */) return std::string();
    if (!fits(elf, offset, size)) bad_elf("section " + std::string(name) + " lies outside the file");
    return std::string(elf.substr(offset, size));
  }
  return std::nullopt;
}

std::vector<std::string> elf_function_symbols(std::string_view elf) {
  const SectionTable table = section_table(elf);
  const std::uint16_t shnum = table.count;
  if (shnum == 0) return {};
  struct Section {
    std::uint32_t type;
    std::uint64_t offset, size, entsize;
    std::uint32_t link;
  };
  auto section = [&](std::uint32_t i) {
    std::uint64_t h = table.header(i);
    Section s{load<std::uint32_t>(elf, h + 4), load<std::uint64_t>(elf, h + 0x18),
              load<std::uint64_t>(elf, h + 0x20), load<std::uint64_t>(elf, h + 0x38),
              load<std::uint32_t>(elf, h + 0x28)};
    if (s.type != 8 /* SHT_NOBITS */ && !fits(elf, s.offset, s.size))
      bad_elf("section " + std::to_string(i) + " lies outside the file");
    return s;
  };
  std::vector<std::string> out;
  for (std::uint32_t i = 0; i < shnum; ++i) {
    Section sym = section(i);
    if (sym.type != 2 /* SHT_SYMTAB */) continue;
    if (sym.entsize < 24) bad_elf("symbol entry size " + std::to_string(sym.entsize));
    if (sym.link >= shnum) bad_elf("symbol table links to missing string table");
    Section str = section(sym.link);
    std::string_view strtab = elf.substr(str.offset, str.size);
    for (std::uint64_t k = 0; k + sym.entsize <= sym.size; k += sym.entsize) {
      std::uint64_t p = sym.offset + k;
      auto name_off = load<std::uint32_t>(elf, p);
      auto info = static_cast<unsigned char>(elf[p + 4]);
      unsigned type = info & 0xf, bind = info >> 4;
      if (type != 2 /* STT_FUNC */ || (bind != 1 /* GLOBAL */ && bind != 2 /* WEAK */)) continue;
      if (name_off >= strtab.size()) bad_elf("symbol name offset outside the string table");
      std::size_t endp = strtab.find('\0', name_off);
      if (endp == std::string_view::npos) bad_elf("unterminated symbol name");
      out.emplace_back(strtab.substr(name_off, endp - name_off));
    }
  }
  return out;
}

std::vector<std::string> ptx_entry_names(std::string_view ptx) {
  std::vector<std::string> out;
  std::size_t i = 0;
  auto ident = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '$' || c == '.';
  };
  while (i < ptx.size()) {
    if (ptx.compare(i, 2, "//") == 0) {
      std::size_t nl = ptx.find('\n', i);
      i = nl == std::string_view::npos ? ptx.size() : nl + 1;
      continue;
    }
    if (ptx.compare(i, 2, "/*") == 0) {
      std::size_t close = ptx.find("*/", i + 2);
      i = close == std::string_view::npos ? ptx.size() : close + 2;
      continue;
    }
    if (ptx.compare(i, 6, ".entry") == 0 && (i == 0 || !ident(ptx[i - 1])) && i + 6 < ptx.size() &&
        (ptx[i + 6] == ' ' || ptx[i + 6] == '\t' || ptx[i + 6] == '\n')) {
      std::size_t j = i + 6;
      while (j < ptx.size() &&
             (ptx[j] == ' ' || ptx[j] == '\t' || ptx[j] == '\n' || ptx[j] == '\r'))
        ++j;
      std::size_t k = j;
      while (k < ptx.size() && ident(ptx[k])) ++k;
      if (k > j) out.emplace_back(ptx.substr(j, k - j));
      i = k;
      continue;
    }
    ++i;
  }
  return out;
}

std::string demangle(const std::string& mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(
      abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), std::free);
  if (status != 0 || !d) return mangled;
  return d.get();
}

std::string demangled_base_name(const std::string& mangled) {
  std::string s = demangle(mangled);
  if (s == mangled) return s;
  // Strip the argument list: the balanced (...) group that ends the name.
  if (!s.empty() && s.back() == ')') {
    int depth = 0;
    for (std::size_t i = s.size(); i-- > 0;) {
      if (s[i] == ')') ++depth;
      if (s[i] == '(' && --depth == 0) {
        s.erase(i);
        break;
      }
    }
  }
  // Strip the return type (only template functions carry one): everything up to the last space
  // outside <...> and (...).
  int angle = 0, paren = 0;
  std::size_t cut = std::string::npos;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '(')
      ++paren;
    else if (c == ')')
      --paren;
    else if (paren == 0 && c == '<')
      ++angle;
    else if (paren == 0 && c == '>')
      --angle;
    else if (c == ' ' && angle == 0 && paren == 0)
      cut = i;
  }
  if (cut != std::string::npos) s.erase(0, cut + 1);
  return s;
}

}  // namespace kiln::format
