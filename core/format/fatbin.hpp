#pragma once
// A reader for the CUDA fatbin container, cubin (ELF) symbol tables and PTX entry names, so kiln
// can list what an artifact holds without cuobjdump. The container is undocumented but stable:
//
//   container := header entry*             (containers may follow each other back to back)
//   header    := u32 magic 0xBA55ED50, u16 version, u16 header_size, u64 payload_size
//   entry     := u16 kind (1 PTX, 2 ELF), u16, u32 entry_header_size, u64 payload_size,
//                u32 compressed_size, u32 options_offset, u16 minor, u16 major, u32 arch,
//                u32 name_offset, u32 name_length, u64 flags, u64, u64 decompressed_size,
//                (entry_header_size - 64 more bytes), payload
//   flags     := 0x8000 zstd-compressed payload, 0x2000 older compression (not readable here),
//                0x100000 arch-specific 'a' target, 0x200000 family 'f' target
//
// All little-endian. Every offset and size is bounds-checked: malformed input gives
// Error{Format}, never a crash.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::format {

constexpr std::uint32_t kFatbinMagic = 0xBA55ED50;

struct FatbinImage {
  enum Kind { Ptx, Elf, Other } kind = Elf;
  int raw_kind = 0;              // the kind field as stored (1 PTX, 2 ELF, anything else is Other)
  int arch = 0;                  // 90 for sm_90a
  char suffix = 0;               // 0, 'a' or 'f'
  bool compressed = false;       // zstd payload (flag 0x8000)
  bool old_compression = false;  // flag 0x2000: a compression this reader cannot undo
  std::uint64_t flags = 0;
  std::uint64_t size = 0;               // payload bytes as stored
  std::uint64_t decompressed_size = 0;  // payload bytes once decompressed (= size if not)
  std::uint64_t compressed_size = 0;    // bytes of the compressed stream inside the payload
  // where the payload starts in the bytes given to parse_fatbin
  std::uint64_t payload_offset = 0;
  std::size_t container = 0;  // which container (0-based) of a concatenation holds it

  std::string target() const;  // "sm_90a" for ELF, "compute_80" for PTX, "kind7_80" otherwise
};

// True when `bytes` starts with the fatbin magic.
bool looks_like_fatbin(std::string_view bytes);

// Every image of every container in `bytes`, in file order. Trailing zero padding after the
// last container is accepted. Throws Error{Format} naming `origin` and the offset at fault.
std::vector<FatbinImage> parse_fatbin(std::string_view bytes, const std::string& origin);

// The image's payload, decompressed when it is zstd-compressed. `bytes` must be what
// parse_fatbin was given. Throws Error{Format} when decompression fails or the size differs
// from the header, Error{Unsupported} for the older compression (flag 0x2000).
std::string fatbin_image_payload(std::string_view bytes, const FatbinImage& image);

// Global and weak FUNC symbols of a cubin's .symtab, in table order (bounds-checked ELF64
// little-endian parse; Error{Format} when it is not one).
std::vector<std::string> elf_function_symbols(std::string_view elf);
// The bytes of the ELF section named `name` (e.g. ".nv.compat"), nullopt when there is none
// (bounds-checked like elf_function_symbols; Error{Format} when it is not an ELF64 or a header
// lies outside it).
std::optional<std::string> elf_section(std::string_view elf, std::string_view name);
// The SM number a cubin was built for (e.g. 90 for sm_90 and sm_90a): (e_flags >> 8) & 0xff in a
// CUDA 13 cubin (EI_OSABI 0x41), e_flags & 0xff in a CUDA 12 one (EI_OSABI 0x33).
int elf_sm_arch(std::string_view elf);

// Names declared with `.entry` in PTX text, in order (comments are skipped).
std::vector<std::string> ptx_entry_names(std::string_view ptx);

// abi::__cxa_demangle; a name that does not demangle comes back unchanged.
std::string demangle(const std::string& mangled);
// The demangled name without return type and argument list: "_ZN4kiln11axpy_kernelIfEEvxfPKT_PS1_"
// -> "kiln::axpy_kernel<float>". Parentheses and spaces inside template arguments are kept.
std::string demangled_base_name(const std::string& mangled);

}  // namespace kiln::format
