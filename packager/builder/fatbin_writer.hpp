#pragma once
// Writes the CUDA fatbin container (format/fatbin.hpp reads it) around one image, for toolkits
// that bring no `fatbinary` (the NVRTC toolkit of scripts/nvrtc_toolkit.sh): one container of
// one uncompressed entry, laid out as fatbinary lays out an uncompressed image of that kind:
//   header  u32 magic 0xBA55ED50, u16 version 1, u16 header size 16, u64 payload size
//   entry   u16 kind (1 PTX, 2 ELF), u16 0x0101, u32 entry header size (a multiple of 16),
//           u64 payload size, u32 compressed size 0, u32 options offset (0: none; 64: the
//           options follow the 64 bytes), u16 minor, u16 major (ELF: the cubin's ELF ABI
//           version, 1; PTX: its .version), u32 arch, u32 name offset 0, u32 name length 0,
//           u64 flags (0x11, | 0x100000 for an `a` target, | 0x200000 for an `f` target,
//           | 0x1000000 with compatibility attributes), u64 0, u64 decompressed size 0
//   options u32 0x48, u32 size, then (size > 0) a zero byte and the cubin's .nv.compat
//           section (ptxas writes one for sm_100 and newer), zeros to a 16-byte header. PTX
//           always has it (size 0: header 80); a cubin only with .nv.compat (else header 64)
//   payload the cubin, or the PTX text NUL-terminated; padded with zeros to 8 bytes.
// For a cubin these are the bytes `fatbinary --create --image3=kind=elf,...` writes (checked
// against CUDA 13.0's fatbinary for 12.9 cubins of sm_90a, sm_100f and sm_120a).
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
