// The fatbin reader (core/format/fatbin.cpp) over any bytes, as `kiln inspect` and the loader use
// it: every container and image, each payload (zstd-decompressed when flagged), the ELF symbol
// table and arch of cubins, the .entry names of PTX, and the demangled base names. Raw ELF and
// PTX input goes straight to their readers too.
#include "format/fatbin.hpp"
#include "fuzz_util.hpp"

namespace {

void read_image(std::string_view payload, kiln::format::FatbinImage::Kind kind) {
  using namespace kiln;
  if (kind == format::FatbinImage::Elf) {
    std::vector<std::string> symbols;
    fuzz::refuses_cleanly([&] { symbols = format::elf_function_symbols(payload); }, {ErrorKind::Format});
    fuzz::refuses_cleanly([&] { (void)format::elf_sm_arch(payload); }, {ErrorKind::Format});
    fuzz::refuses_cleanly([&] { (void)format::elf_section(payload, ".nv.compat"); },
                          {ErrorKind::Format});
    for (const auto& s : symbols)
      fuzz::refuses_cleanly([&] { (void)format::demangled_base_name(s); }, {ErrorKind::Format});
  } else {
    std::vector<std::string> entries;
    fuzz::refuses_cleanly([&] { entries = format::ptx_entry_names(payload); }, {ErrorKind::Format});
    for (const auto& s : entries)
      fuzz::refuses_cleanly([&] { (void)format::demangled_base_name(s); }, {ErrorKind::Format});
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kiln;
  const std::string_view bytes = fuzz::as_text(data, size);
  const std::string origin = "fuzz.fatbin";
  if (!format::looks_like_fatbin(bytes)) {
    read_image(bytes, bytes.substr(0, 4) ==
                              "\x7f"
                              "ELF"
                          ? format::FatbinImage::Elf
                          : format::FatbinImage::Ptx);
    return 0;
  }
  std::vector<format::FatbinImage> images;
  if (!fuzz::refuses_cleanly([&] { images = format::parse_fatbin(bytes, origin); }, {ErrorKind::Format},
                             origin))
    return 0;
  for (const auto& image : images) {
    if (image.payload_offset > size || image.size > size - image.payload_offset)
      fuzz::finding("parse_fatbin returned an image beyond the input");
    (void)image.target();
    std::string payload;
    if (!fuzz::refuses_cleanly([&] { payload = format::fatbin_image_payload(bytes, image); },
                               {ErrorKind::Format, ErrorKind::Unsupported}))
      continue;
    if (payload.size() != image.decompressed_size)
      fuzz::finding("payload size " + std::to_string(payload.size()) + " != decompressed_size " +
                    std::to_string(image.decompressed_size));
    if (image.kind != format::FatbinImage::Other) read_image(payload, image.kind);
  }
  return 0;
}
