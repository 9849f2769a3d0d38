#pragma once
// Joining a list into one line of text, for messages ("offers sm_80, sm_90a").
#include <string>
#include <string_view>
#include <utility>

namespace kiln::util {

// Each element of `items` as text through `text`, with `sep` between two: "" for none.
// join(archives, ", ", [](const IndexEntry& a) { return a.target; }).
template <class Range, class Text>
std::string join(const Range& items, std::string_view sep, Text&& text) {
  std::string out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out += sep;
    first = false;
    out += text(item);
  }
  return out;
}

// The elements of `items` (strings, string views, C strings), with `sep` between two:
// join(std::vector<std::string>{"a", "b"}, ", ") is "a, b".
template <class Range>
std::string join(const Range& items, std::string_view sep) {
  return join(
      items, sep, [](const auto& item) -> const auto& { return item; });
}

}  // namespace kiln::util
