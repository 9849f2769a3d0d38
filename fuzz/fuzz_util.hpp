#pragma once
// What every fuzz target shares: the input as text, and the one rule for what counts as a
// finding. A parser refusing bad bytes with kiln::Error of a documented kind, naming its origin,
// is the expected outcome; any other exception, another kind, a message that does not name the
// file, or a broken round trip is a bug: it is printed and the process aborts, so libFuzzer
// keeps the input (crash-<sha1>) like any sanitizer report.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <initializer_list>
#include <string>
#include <string_view>

#include "kiln/error.hpp"

namespace kiln::fuzz {

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "kiln fuzz finding: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// Runs `f`; returns true when it returned, false when it threw kiln::Error of one of `allowed`
// whose message contains `origin` (empty: not checked). Anything else is a finding.
template <class F>
bool refuses_cleanly(F&& f, std::initializer_list<ErrorKind> allowed,
                     const std::string& origin = "") {
  try {
    f();
    return true;
  } catch (const Error& e) {
    bool ok = false;
    for (ErrorKind k : allowed) ok = ok || e.kind() == k;
    if (!ok)
      finding(std::string("Error{") + to_string(e.kind()) + "} not documented here: " + e.what());
    if (!origin.empty() && std::string_view(e.what()).find(origin) == std::string_view::npos)
      finding("the message does not name '" + origin + "': " + e.what());
    return false;
  } catch (const std::exception& e) {
    finding(std::string("an exception other than kiln::Error escaped: ") + e.what());
  } catch (...) {
    finding("a non-std exception escaped");
  }
}

}  // namespace kiln::fuzz
