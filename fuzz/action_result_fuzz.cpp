// The build result cache's entry (packager/result_cache/action_result.cpp): ac/<key> as a cache
// directory or server serves it, a Bazel ActionResult in protobuf wire form. Whatever is served,
// it is refused with Error{Format} naming the entry, or it names one output with a SHA-256 digest
// and writes and reads back to the same output.
#include "fuzz_util.hpp"
#include "io/sha256.hpp"
#include "result_cache/result_cache.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string origin = "cache/ac/entry";
  kiln::fuzz::refuses_cleanly(
      [&] {
        kiln::result_cache::CachedOutput out = kiln::result_cache::decode_action_result(kiln::fuzz::as_text(data, size), origin);
        if (!kiln::io::is_sha256_hex(out.sha256))
          kiln::fuzz::finding("accepted a digest that is not SHA-256 hex: " + out.sha256);
        kiln::result_cache::CachedOutput back = kiln::result_cache::decode_action_result(kiln::result_cache::encode_action_result(out), origin);
        if (back.name != out.name || back.sha256 != out.sha256 || back.size != out.size)
          kiln::fuzz::finding("an accepted entry does not write and read back to the same output");
      },
      {kiln::ErrorKind::Format}, origin);
  return 0;
}
