// RECORD (verify_wheel, packager/wheel/wheel_verify.cpp) with everything around it well formed: the
// input is the RECORD text of a real kiln wheel (wheel_contents of a one-kernel manifest),
// written as a zip, so the fuzzer spends its time in the RECORD rows (csv quoting, hash, size,
// paths) rather than in the zip reader. The wheel's own RECORD must give no problem: the target
// can fail.
#include "format/archive.hpp"
#include "format/manifest.hpp"
#include "fuzz_util.hpp"
#include "io/sha256.hpp"
#include "wheel_tmp.hpp"

namespace {

std::vector<kiln::wheel::WheelFile> real_wheel() {
  using namespace kiln;
  const std::string fatbin = "not a real fatbin: wheel_contents does not read it";
  format::Manifest m;
  m.package = "kiln-kernels";
  m.package_version = version();
  m.git_commit = "0123abc";
  m.cuda_version = cuda_version();
  m.target = "sm_80";
  m.build_time = 1700000000;
  format::ArtifactEntry a;
  a.uri = "axpy_dtype_f32";
  a.family = "axpy";
  a.params = {{"dtype", "f32"}};
  a.entries = {{"kiln::axpy_kernel<float>", "_ZN4kiln11axpy_kernelIfEEvxfPKT_PS1_"}};
  a.source_hash = std::string(64, 'a');
  a.flags = {"-O3"};
  a.file = "axpy_dtype_f32.fatbin";
  a.size = fatbin.size();
  a.sha256 = io::sha256_hex(fatbin);
  m.artifacts.push_back(a);
  std::vector<format::ArchiveMember> members = {{"manifest.json", format::manifest_to_json(m)}, {a.file, fatbin}};
  return wheel::wheel_contents(m, members, version());
}

std::vector<kiln::wheel::WheelProblem> verify_with_record(std::string_view record) {
  using namespace kiln;
  static const std::vector<wheel::WheelFile> files = real_wheel();
  auto with = files;
  if (with.empty() || with.back().path.size() < 7 ||
      with.back().path.compare(with.back().path.size() - 7, 7, "/RECORD") != 0)
    fuzz::finding("wheel_contents no longer puts RECORD last");
  with.back().data = std::string(record);
  const auto& whl = fuzz::wheel_file();
  wheel::write_zip(whl.path(), with, wheel::kZipEpochMin);
  std::vector<wheel::WheelProblem> problems;
  fuzz::refuses_cleanly([&] { problems = wheel::verify_wheel(whl.path()); }, {});
  return problems;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  auto files = real_wheel();
  auto problems = verify_with_record(files.back().data);
  if (!problems.empty())
    kiln::fuzz::finding("the real RECORD gives a problem: " + problems.front().what);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)verify_with_record(kiln::fuzz::as_text(data, size));
  return 0;
}
