// The fatbin reader against real nvcc output: what nvcc writes is what kiln must read.
#include <gtest/gtest.h>

#include <algorithm>

#include "format/fatbin.hpp"
#include "test_util.hpp"

namespace kiln {
namespace {

using test::TempDir;

const char* kKernel = R"(
namespace kiln {
template <typename T>
__global__ void axpy_kernel(long long n, float a, const T* x, T* y) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
template __global__ void axpy_kernel<float>(long long, float, const float*, float*);
}
)";
const char* kSymbol = "_ZN4kiln11axpy_kernelIfEEvxfPKT_PS1_";

class NvccFatbin : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    test::write_file(*dir_ / "k.cu", kKernel);
    auto r = test::run(std::string(KILN_NVCC) +
                       " --fatbin -gencode 'arch=compute_80,code=[sm_80,compute_80]' " +
                       "-gencode arch=compute_90a,code=sm_90a -o " + (*dir_ / "k.fatbin").string() +
                       " " + (*dir_ / "k.cu").string());
    ASSERT_EQ(r.exit_code, 0) << r.out;
    bytes_ = new std::string(test::read_file(*dir_ / "k.fatbin"));
  }
  static void TearDownTestSuite() {
    delete bytes_;
    delete dir_;
  }
  static TempDir* dir_;
  static std::string* bytes_;
};
TempDir* NvccFatbin::dir_ = nullptr;
std::string* NvccFatbin::bytes_ = nullptr;

TEST_F(NvccFatbin, ListsSm80ElfCompute80PtxAndSm90aElf) {
  auto images = format::parse_fatbin(*bytes_, "k.fatbin");
  std::vector<std::string> targets;
  for (const auto& i : images) targets.push_back(i.target());
  std::sort(targets.begin(), targets.end());
  EXPECT_EQ(targets, (std::vector<std::string>{"compute_80", "sm_80", "sm_90a"}));
  for (const auto& i : images) {
    if (i.target() == "sm_90a") {
      EXPECT_EQ(i.kind, format::FatbinImage::Elf);
      EXPECT_EQ(i.suffix, 'a');
    }
    if (i.target() == "compute_80") {
      EXPECT_EQ(i.kind, format::FatbinImage::Ptx);
    }
  }
}

TEST_F(NvccFatbin, ElfImagesCarryTheirSmInEflagsAndTheKernelSymbol) {
  int seen = 0;
  for (const auto& img : format::parse_fatbin(*bytes_, "k.fatbin")) {
    if (img.kind != format::FatbinImage::Elf) continue;
    ++seen;
    std::string elf = format::fatbin_image_payload(*bytes_, img);
    EXPECT_EQ(format::elf_sm_arch(elf), img.arch) << img.target();
    auto syms = format::elf_function_symbols(elf);
    ASSERT_EQ(syms.size(), 1u) << img.target();
    EXPECT_EQ(syms[0], kSymbol);
    EXPECT_EQ(format::demangled_base_name(syms[0]), "kiln::axpy_kernel<float>");
  }
  EXPECT_EQ(seen, 2);
}

TEST_F(NvccFatbin, PtxImageDecompressesAndNamesTheEntry) {
  for (const auto& img : format::parse_fatbin(*bytes_, "k.fatbin")) {
    if (img.kind != format::FatbinImage::Ptx) continue;
    std::string ptx = format::fatbin_image_payload(*bytes_, img);
    EXPECT_EQ(ptx.size(), img.decompressed_size);
    EXPECT_NE(ptx.find(".target sm_80"), std::string::npos);
    EXPECT_EQ(format::ptx_entry_names(ptx), std::vector<std::string>{kSymbol});
  }
}

TEST_F(NvccFatbin, InspectCliListsImagesAndKernels) {
  auto r = test::run(test::kiln_cli() + " inspect --json " + (*dir_ / "k.fatbin").string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("\"kind\": \"fatbin\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"target\": \"sm_90a\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"target\": \"compute_80\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kiln::axpy_kernel<float>(long long, float, float const*, float*)"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace kiln
