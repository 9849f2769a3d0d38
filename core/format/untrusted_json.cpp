#include "format/untrusted_json.hpp"

namespace kiln::format {

std::optional<std::size_t> find_excess_nesting(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if (c == ']' || c == '}') {
      // Unbalanced closers are the parser's to report; depth never goes below zero here.
      if (depth > 0) --depth;
    }
  }
  return std::nullopt;
}

void check_json_bounds(std::string_view text, const std::string& origin, std::size_t max_bytes,
                       int max_depth) {
  if (text.size() > max_bytes)
    throw Error(ErrorKind::Limit, origin + ": JSON is " + std::to_string(text.size()) +
                                      " bytes, more than the limit of " +
                                      std::to_string(max_bytes) + " (docs/security.md)");
  if (auto at = find_excess_nesting(text, max_depth))
    throw Error(ErrorKind::Limit, origin + ": JSON nests deeper than the limit of " +
                                      std::to_string(max_depth) + " levels (at byte " +
                                      std::to_string(*at) + "; docs/security.md)");
}

}  // namespace kiln::format
