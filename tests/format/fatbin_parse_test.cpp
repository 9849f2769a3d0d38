#include "format/fatbin.hpp"

#include <gtest/gtest.h>
#include <zstd.h>

#include "kiln/error.hpp"

namespace kiln {
namespace {

void put(std::string& s, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

struct FakeEntry {
  int kind = 2;
  int arch = 90;
  std::uint64_t flags = 0;
  std::string payload;  // as stored (compressed when flags has 0x8000)
  std::uint32_t compressed_size = 0;
  std::uint64_t decompressed_size = 0;
  std::uint32_t header_size = 64;
};

// A container laid out as nvcc writes it (see fatbin.hpp).
std::string container(const std::vector<FakeEntry>& entries) {
  std::string body;
  for (const auto& e : entries) {
    std::string h;
    put(h, e.kind, 2);
    put(h, 0x0101, 2);
    put(h, e.header_size, 4);
    put(h, e.payload.size(), 8);
    put(h, e.compressed_size, 4);
    put(h, 0, 4);  // options offset
    put(h, 0, 2);
    put(h, 0, 2);
    put(h, e.arch, 4);
    put(h, 0, 4);
    put(h, 0, 4);
    put(h, e.flags | 0x11, 8);
    put(h, 0, 8);
    put(h, e.decompressed_size, 8);
    h.resize(e.header_size, '\0');
    body += h + e.payload;
  }
  std::string out;
  put(out, format::kFatbinMagic, 4);
  put(out, 1, 2);
  put(out, 16, 2);
  put(out, body.size(), 8);
  return out + body;
}

const std::string kPtx =
    "// comment .entry not_me(\n.version 9.0\n.target sm_80\n"
    ".visible .entry _ZN4kiln11axpy_kernelIfEEvxfPKT_PS1_(\n .param .u64 p0\n)\n{ ret; }\n"
    "/* .entry also_not_me */\n.entry\t_Z3hopv()\n{ ret; }\n";

FakeEntry zstd_ptx(int arch) {
  std::string buf(ZSTD_compressBound(kPtx.size()), '\0');
  size_t n = ZSTD_compress(buf.data(), buf.size(), kPtx.data(), kPtx.size(), 19);
  EXPECT_FALSE(ZSTD_isError(n));
  buf.resize(n);
  FakeEntry e;
  e.kind = 1;
  e.arch = arch;
  e.flags = 0x8000;
  e.compressed_size = static_cast<std::uint32_t>(n);
  e.decompressed_size = kPtx.size();
  e.payload = buf + std::string(8 - n % 8, '\0');  // nvcc pads payloads
  e.header_size = 80;
  return e;
}

FakeEntry elf(int arch, std::uint64_t flags = 0) {
  FakeEntry e;
  e.arch = arch;
  e.flags = flags;
  e.payload = std::string(
                  "\x7f"
                  "ELF",
                  4) +
              std::string(60, '\0');
  return e;
}

std::string format_error(std::string_view bytes) {
  try {
    format::parse_fatbin(bytes, "k.fatbin");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Format) << e.what();
    return e.what();
  }
  return "";
}

TEST(Fatbin, ListsElfAndCompressedPtxImagesWithTargets) {
  std::string bytes = container({elf(80), zstd_ptx(80), elf(90, 0x100000), elf(100, 0x200000)});
  auto images = format::parse_fatbin(bytes, "k.fatbin");
  ASSERT_EQ(images.size(), 4u);
  EXPECT_EQ(images[0].target(), "sm_80");
  EXPECT_EQ(images[1].target(), "compute_80");
  EXPECT_TRUE(images[1].compressed);
  EXPECT_EQ(images[1].decompressed_size, kPtx.size());
  EXPECT_EQ(images[2].target(), "sm_90a");
  EXPECT_EQ(images[2].suffix, 'a');
  EXPECT_EQ(images[3].target(), "sm_100f");
  EXPECT_EQ(format::fatbin_image_payload(bytes, images[1]), kPtx);
  EXPECT_EQ(format::fatbin_image_payload(bytes, images[0]).substr(0, 4),
            "\x7f"
            "ELF");
}

TEST(Fatbin, ReadsContainersBackToBackAndIgnoresTrailingZeros) {
  std::string bytes = container({elf(80)}) + container({elf(90), elf(86)}) + std::string(8, '\0');
  auto images = format::parse_fatbin(bytes, "k.fatbin");
  ASSERT_EQ(images.size(), 3u);
  EXPECT_EQ(images[0].container, 0u);
  EXPECT_EQ(images[2].container, 1u);
  EXPECT_EQ(images[2].target(), "sm_86");
}

TEST(Fatbin, EveryTruncationIsAFormatErrorNeverACrash) {
  std::string bytes = container({elf(80), zstd_ptx(80)});
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::string msg = format_error(std::string_view(bytes).substr(0, n));
    EXPECT_NE(msg.find("k.fatbin"), std::string::npos) << "prefix " << n << ": " << msg;
  }
}

TEST(Fatbin, CorruptBytesNeverCrashTheParserOrDecompressor) {
  std::string good = container({elf(80), zstd_ptx(80)});
  for (size_t i = 0; i < good.size(); ++i) {
    for (unsigned char x : {0x01, 0x80, 0xff}) {
      std::string bytes = good;
      bytes[i] = static_cast<char>(bytes[i] ^ x);
      try {
        for (const auto& img : format::parse_fatbin(bytes, "k.fatbin")) format::fatbin_image_payload(bytes, img);
      } catch (const Error& e) {
        EXPECT_TRUE(e.kind() == ErrorKind::Format || e.kind() == ErrorKind::Unsupported)
            << e.what();
      }
    }
  }
}

TEST(Fatbin, HugeSizesAreRefusedWithoutOverflow) {
  std::string bytes = container({elf(80)});
  std::string big = bytes;
  for (int i = 0; i < 8; ++i) big[8 + i] = '\xff';  // container payload size
  EXPECT_NE(format_error(big).find("runs past the end"), std::string::npos);
  big = bytes;
  for (int i = 0; i < 8; ++i) big[16 + 8 + i] = '\xff';  // entry payload size
  EXPECT_NE(format_error(big).find("runs past the end of its container"), std::string::npos);
  big = bytes;
  big[16 + 4] = 8;  // entry header smaller than the fields it must hold
  big[16 + 5] = 0;
  EXPECT_NE(format_error(big).find("entry header size 8"), std::string::npos);
}

TEST(Fatbin, WrongMagicNamesWhatWasFound) {
  std::string msg = format_error(std::string("\x7f"
                                             "ELF",
                                             4) +
                                 std::string(60, '\0'));
  EXPECT_NE(msg.find("magic is 0x464c457f"), std::string::npos) << msg;
  EXPECT_NE(msg.find("0xba55ed50"), std::string::npos) << msg;
  EXPECT_NE(format_error("").find("empty"), std::string::npos);
}

TEST(Fatbin, OlderCompressionIsReportedAsUnsupported) {
  FakeEntry e = elf(80, 0x2000);
  std::string bytes = container({e});
  auto images = format::parse_fatbin(bytes, "k.fatbin");
  ASSERT_EQ(images.size(), 1u);
  EXPECT_TRUE(images[0].old_compression);
  try {
    format::fatbin_image_payload(bytes, images[0]);
    ADD_FAILURE();
  } catch (const Error& err) {
    EXPECT_EQ(err.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(err.what()).find("0x2000"), std::string::npos) << err.what();
  }
}

TEST(Fatbin, CorruptOrShortZstdPayloadIsAFormatError) {
  FakeEntry bad_magic = zstd_ptx(80);
  bad_magic.payload[0] = 'X';
  FakeEntry short_stream = zstd_ptx(80);
  short_stream.compressed_size -= 4;
  FakeEntry wrong_size = zstd_ptx(80);
  wrong_size.decompressed_size += 1;
  for (const auto& e : {bad_magic, short_stream, wrong_size}) {
    std::string bytes = container({e});
    auto images = format::parse_fatbin(bytes, "k.fatbin");
    try {
      format::fatbin_image_payload(bytes, images.at(0));
      ADD_FAILURE() << "corruption went unnoticed";
    } catch (const Error& err) {
      EXPECT_EQ(err.kind(), ErrorKind::Format) << err.what();
      EXPECT_NE(std::string(err.what()).find("compute_80"), std::string::npos) << err.what();
    }
  }
}

TEST(Ptx, EntryNamesSkipComments) {
  EXPECT_EQ(format::ptx_entry_names(kPtx),
            (std::vector<std::string>{"_ZN4kiln11axpy_kernelIfEEvxfPKT_PS1_", "_Z3hopv"}));
}

TEST(Elf, NonElfInputIsAFormatError) {
  for (std::string bad : {std::string("short"), std::string(64, 'x')}) {
    try {
      format::elf_function_symbols(bad);
      ADD_FAILURE();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Format);
    }
  }
  // Section headers claimed past the end of the file.
  std::string e = std::string(
                      "\x7f"
                      "ELF\x02\x01",
                      6) +
                  std::string(58, '\0');
  e[0x28] = 0x40;  // e_shoff = 64 = end of file
  e[0x3a] = 64;    // e_shentsize
  e[0x3c] = 3;     // e_shnum
  EXPECT_THROW(format::elf_function_symbols(e), Error);
}

TEST(Demangle, BaseNameDropsReturnTypeAndArguments) {
  EXPECT_EQ(format::demangled_base_name("_ZN4kiln11axpy_kernelIfEEvxfPKT_PS1_"),
            "kiln::axpy_kernel<float>");
  EXPECT_EQ(format::demangled_base_name("_ZN4kiln14rmsnorm_kernelI6__halfLi256EEEvPKT_x"),
            "kiln::rmsnorm_kernel<__half, 256>");
  EXPECT_EQ(format::demangled_base_name("_ZN4kiln3hopEv"), "kiln::hop");
  // Parentheses and spaces inside template arguments stay.
  EXPECT_EQ(format::demangled_base_name("_ZN4kiln5ftypeIPFvicEEEvv"), "kiln::ftype<void (*)(int, char)>");
  EXPECT_EQ(format::demangled_base_name("_ZN4kiln12_GLOBAL__N_14anonEi"),
            "kiln::(anonymous namespace)::anon");
  EXPECT_EQ(format::demangled_base_name("not_mangled"), "not_mangled");
  EXPECT_EQ(format::demangle("_ZN4kiln3hopEv"), "kiln::hop()");
}

// The cubin's SM from its ELF header, in both layouts of e_flags (bytes as ptxas 12.9 and 13.0
// write them for sm_90a): a CUDA 12 cubin read as a CUDA 13 one says sm_13, and its compile
// result would be refused.
TEST(Elf, SmArchOfCuda12AndCuda13Cubins) {
  auto header = [](unsigned char osabi, unsigned char abi_version, std::uint32_t e_flags) {
    std::string e(64, '\0');
    e.replace(0, 4, "\x7f" "ELF");
    e[4] = 2;
    e[5] = 1;
    e[6] = 1;
    e[7] = static_cast<char>(osabi);
    e[8] = static_cast<char>(abi_version);
    for (int i = 0; i < 4; ++i) e[0x30 + i] = static_cast<char>((e_flags >> (8 * i)) & 0xff);
    return e;
  };
  EXPECT_EQ(format::elf_sm_arch(header(0x33, 7, 0x005a0d5a)), 90);  // CUDA 12.9, sm_90a
  EXPECT_EQ(format::elf_sm_arch(header(0x41, 8, 0x06005a04)), 90);  // CUDA 13.0, sm_90a
  EXPECT_EQ(format::elf_sm_arch(header(0x33, 7, 0x00500550)), 80);  // CUDA 12.x, sm_80
}

}  // namespace
}  // namespace kiln
