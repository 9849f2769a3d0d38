#pragma once
// CUDA toolkits and drivers: which driver runs the code a toolkit built, and which targets a
// toolkit can build. Pure facts over version numbers, shared by the loader's choice (plan/), the
// commands that explain it, and the builder; docs/compatibility.md is the same rule in words.
//
// Versions: a toolkit is the manifest's and the index's `cuda_version`, "MAJOR.MINOR" ("13.0").
// A driver is what cuDriverGetVersion reports, 1000 * major + 10 * minor (12080 for CUDA 12.8).
#include <optional>
#include <string>
#include <string_view>

#include "format/target.hpp"

namespace kiln::format {

struct CudaVersion {
  int major = 0, minor = 0;
  std::string str() const;  // "12.8"
  // As cuDriverGetVersion spells it: 12080.
  int driver_number() const { return major * 1000 + minor * 10; }
  bool operator==(const CudaVersion& o) const { return major == o.major && minor == o.minor; }
  bool operator<(const CudaVersion& o) const {
    return major != o.major ? major < o.major : minor < o.minor;
  }
};

// "13.0" (MAJOR.MINOR, both decimal, at most 3 digits each); nullopt for anything else.
std::optional<CudaVersion> parse_cuda_version(std::string_view text);
// A `--driver X.Y` value (answering for a driver that is not here): "12.8" -> 12080, the number
// cuDriverGetVersion gives. Throws Error{Usage} naming `flag` and the value otherwise. The one
// parser of every command's --driver (resolve, compat, fetch, bundle).
int parse_driver_option(std::string_view text, std::string_view flag);
// The CUDA version of a cuDriverGetVersion number: 12080 -> 12.8.
CudaVersion driver_cuda_version(int driver_number);

// The oldest driver release (the number nvidia-smi shows) that runs code of CUDA `major`:
// 13 -> 580, 12 -> 525, 11 -> 450; nullopt for a major kiln has no fact about.
std::optional<int> oldest_driver_release(int cuda_major);

// Why a driver of `driver_number` cannot run code built by `toolkit`; nullopt when it runs it.
//   SASS (cubin): the driver's major is at least the toolkit's, and the driver is at least the
//     first release of the toolkit's major (minor-version compatibility: 12.8 SASS runs on a
//     12.2 driver; backward compatibility: on every newer driver, 13.x included).
//   PTX: the driver JIT-compiles only PTX of a toolkit no newer than itself (12.8 PTX needs a
//     12.8 driver or newer).
// The sentence names both versions: "built by CUDA 13.0, needs a driver >= 580 (CUDA 13.0);
// this driver runs CUDA 12.8".
std::optional<std::string> driver_refuses(const CudaVersion& toolkit, bool ptx, int driver_number);
// The same over the manifest's spelling; a toolkit that is not MAJOR.MINOR is refused, saying so.
std::optional<std::string> driver_refuses(std::string_view toolkit, bool ptx, int driver_number);

// What a driver of `driver_number` runs, for messages: "CUDA 12.8".
std::string driver_words(int driver_number);
// What code of `toolkit` needs, for messages and docs: "a driver >= 580 (CUDA 13.0)" for SASS,
// "a driver of CUDA >= 12.8" for PTX.
std::string driver_needed(const CudaVersion& toolkit, bool ptx);

// Why `toolkit` cannot build `target`; nullopt when it can. CUDA 13 dropped sm_70 and sm_72;
// sm_100, sm_101 and sm_120 came with 12.8, sm_103, sm_121 and the family (`f`) targets with
// 12.9, sm_110 with 13.0 (where sm_101 became sm_110); sm_90 came with 11.8.
std::optional<std::string> toolkit_cannot_build(const CudaVersion& toolkit, const Target& target);

}  // namespace kiln::format
