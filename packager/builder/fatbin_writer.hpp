#pragma once
// Writes the CUDA fatbin container (format/fatbin.hpp reads it) around one image, for toolkits
// that bring no `fatbinary` (the NVRTC toolkit of scripts/nvrtc_toolkit.sh): one container of
// one uncompressed entry, laid out as fatbinary lays out an uncompressed image of that kind:
//   header  u32 magic 0xBA55ED50, u16 version 1, u16 header size 16, u64 payload size
//   entry   u16 kind (1 PTX, 2 ELF), u16 0x0101, u32 entry header size (ELF 64, PTX 80),
//           u64 payload size, u32 compressed size 0, u32 options offset (PTX 64: the 16 bytes
//           after the 64, "0x48" then zeros, as fatbinary writes them; ELF 0), u16 minor,
//           u16 major (ELF: the cubin's ELF ABI version, 1; PTX: its .version), u32 arch,
//           u32 name offset 0, u32 name length 0, u64 flags (0x11, | 0x100000 for an `a`
//           target, | 0x200000 for an `f` target), u64 0, u64 decompressed size 0
//   payload the cubin, or the PTX text NUL-terminated; padded with zeros to 8 bytes.
// Pure and deterministic: the same image gives the same bytes. docs/decisions.md, "An NVRTC
// build back end".
#include <string>
#include <string_view>

#include "format/target.hpp"

namespace kiln::builder {

// A fatbin holding `cubin` as the SASS image of `target` (a SASS target). Throws Error{Format}
// when the cubin is not an ELF of the target's SM.
std::string fatbin_of_cubin(std::string_view cubin, const format::Target& target);
// A fatbin holding `ptx` as the PTX image of `target` (a PTX target). Throws Error{Format} when
// the text has no `.version X.Y` line.
std::string fatbin_of_ptx(std::string_view ptx, const format::Target& target);

}  // namespace kiln::builder
