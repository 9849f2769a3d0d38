// A whole .whl: the zip reader (packager/wheel/wheel_zip.cpp), then verify_wheel (dist-info, WHEEL,
// METADATA, and RECORD: every member listed once with its sha256 and size) and wheel_manifests
// (every manifest.json inside; both packager/wheel/wheel_verify.cpp), as `kiln mirror sync`/`verify`
// check wheels.
#include "fuzz_util.hpp"
#include "wheel_tmp.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kiln;
  const auto& whl = fuzz::wheel_file();
  whl.write(fuzz::as_text(data, size));
  const std::string origin = whl.path().string();
  std::vector<wheel::WheelProblem> problems;
  fuzz::refuses_cleanly([&] { problems = wheel::verify_wheel(whl.path()); }, {});
  for (const auto& p : problems)
    if (p.file.rfind(origin, 0) != 0)
      fuzz::finding("a problem names '" + p.file + "', not the wheel: " + p.what);
  fuzz::refuses_cleanly(
      [&] { (void)wheel::wheel_manifests(whl.path()); },
      {ErrorKind::Format, ErrorKind::Stale, ErrorKind::NotFound, ErrorKind::Limit}, origin);
  return 0;
}
