#pragma once
// The one entry point for JSON from untrusted bytes (index, manifest, JIT sidecar, anything a
// mirror, archive or store hands us). Size and nesting depth are checked on the raw text
// before nlohmann builds a tree: its tree, destructor and dump() recurse once per level, so a
// 100k-deep document would overflow the stack. Limits: limits.hpp.
#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/limits.hpp"
#include "kiln/error.hpp"

namespace kiln::format {

// Pure: the byte offset of the first '[' or '{' (outside strings) that opens level
// max_depth + 1, or nullopt when the text never nests deeper than max_depth.
std::optional<std::size_t> find_excess_nesting(std::string_view text, int max_depth);

// Throws Error{Limit} naming `origin` when text is larger than max_bytes or nests deeper than
// max_depth.
void check_json_bounds(std::string_view text, const std::string& origin,
                       std::size_t max_bytes = io::limits::kMaxJsonBytes,
                       int max_depth = io::limits::kMaxJsonDepth);

// What parse_untrusted_json does with a key an object gives twice. JSON leaves it open
// (RFC 8259: names SHOULD be unique), and readers differ (first value, last value, refusal).
enum class RepeatedKeys {
  last_wins,  // the last value, at the key's first position (what JsonT::parse gives)
  refused,    // Error{Format} naming `origin` and the key's path: a format kiln writes
};

namespace json_detail {

// SFINAE: reserve() where the object type has it (ordered_map, a vector), nothing otherwise.
template <typename M>
auto reserve_members(M& m, std::size_t n, int) -> decltype(m.reserve(n), void()) {
  m.reserve(n);
}
template <typename M>
void reserve_members(M&, std::size_t, long) {}

// Builds the tree JsonT::parse builds (same values, same member order, a repeated key's last
// value at its first position), but collects an object's members in a vector whose moves cannot
// throw and moves them into the object once, at its end. nlohmann's ordered_map is a vector of
// pair<const string, json>: every time it grows it copies each member's whole subtree, which
// made a manifest's parse (31 KB) cost more than twice the lexing.
template <typename JsonT>
class TreeBuilder {
 public:
  TreeBuilder(RepeatedKeys repeated, const std::string& origin)
      : repeated_(repeated), origin_(origin) {}

  using number_integer_t = typename JsonT::number_integer_t;
  using number_unsigned_t = typename JsonT::number_unsigned_t;
  using number_float_t = typename JsonT::number_float_t;
  using string_t = typename JsonT::string_t;
  using binary_t = typename JsonT::binary_t;

  bool null() { return add(JsonT(nullptr)); }
  bool boolean(bool v) { return add(JsonT(v)); }
  bool number_integer(number_integer_t v) { return add(JsonT(v)); }
  bool number_unsigned(number_unsigned_t v) { return add(JsonT(v)); }
  bool number_float(number_float_t v, const string_t&) { return add(JsonT(v)); }
  bool string(string_t& v) { return add(JsonT(std::move(v))); }
  bool binary(binary_t&) {
    throw Error(ErrorKind::Internal, "JSON text produced a binary value");  // CBOR & co only
  }
  bool start_object(std::size_t) {
    frames_.emplace_back();
    frames_.back().object = true;
    return true;
  }
  bool key(string_t& k) {
    frames_.back().key = std::move(k);
    return true;
  }
  bool end_object() {
    JsonT obj(JsonT::value_t::object);
    auto& members = obj.template get_ref<typename JsonT::object_t&>();
    reserve_members(members, frames_.back().members.size(), 0);
    for (auto& kv : frames_.back().members) members[kv.first] = std::move(kv.second);
    // Fewer members than keys read: a key was given twice.
    if (members.size() != frames_.back().members.size() && repeated_ == RepeatedKeys::refused)
      refuse_repeated_key();
    frames_.pop_back();
    return add(std::move(obj));
  }
  bool start_array(std::size_t) {
    frames_.emplace_back();
    frames_.back().array = JsonT::array();
    return true;
  }
  bool end_array() {
    JsonT arr = std::move(frames_.back().array);
    frames_.pop_back();
    return add(std::move(arr));
  }
  template <class Exception>
  bool parse_error(std::size_t, const std::string&, const Exception& ex) {
    throw ex;  // the exception JsonT::parse throws, with its message
  }

  JsonT result;

 private:
  struct Frame {
    bool object = false;
    string_t key;
    std::vector<std::pair<string_t, JsonT>> members;
    JsonT array;
  };
  // The innermost object's first key given again, by its path ("artifacts[2].family"), as the
  // format readers name fields in their errors.
  [[noreturn]] void refuse_repeated_key() const {
    std::string path;
    for (std::size_t i = 0; i + 1 < frames_.size(); ++i)
      path += frames_[i].object ? (path.empty() ? "" : ".") + frames_[i].key
                                : "[" + std::to_string(frames_[i].array.size()) + "]";
    std::set<std::string_view> keys;
    for (const auto& kv : frames_.back().members)
      if (!keys.insert(kv.first).second) {
        path += (path.empty() ? "" : ".") + kv.first;
        break;
      }
    throw Error(ErrorKind::Format,
                origin_ + ": field '" + path + "': given more than once in one object");
  }
  bool add(JsonT v) {
    if (frames_.empty()) {
      result = std::move(v);
      return true;
    }
    Frame& f = frames_.back();
    if (f.object)
      f.members.emplace_back(std::move(f.key), std::move(v));
    else
      f.array.push_back(std::move(v));
    return true;
  }
  std::vector<Frame> frames_;
  RepeatedKeys repeated_;
  const std::string& origin_;
};

}  // namespace json_detail

// check_json_bounds, then parse (into the tree JsonT::parse gives). Malformed JSON (including
// numbers out of range such as 1e999) throws Error{Format} naming `origin`; so does a key given
// twice in one object when `repeated` is RepeatedKeys::refused.
template <typename JsonT>
JsonT parse_untrusted_json(std::string_view text, const std::string& origin,
                           std::size_t max_bytes = io::limits::kMaxJsonBytes,
                           RepeatedKeys repeated = RepeatedKeys::last_wins) {
  check_json_bounds(text, origin, max_bytes);
  try {
    json_detail::TreeBuilder<JsonT> builder(repeated, origin);
    if (!JsonT::sax_parse(text.begin(), text.end(), &builder))
      throw Error(ErrorKind::Format, origin + ": not valid JSON");
    return std::move(builder.result);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::Format, origin + ": not valid JSON: " + e.what());
  }
}

// A value from untrusted JSON as quoted in an error message: scalars dumped and cut to
// io::limits::kMaxQuotedChars, containers described ("an array of 3 elements"), never dumped whole.
template <typename JsonT>
std::string quote_json(const JsonT& v) {
  if (v.is_object()) return "an object of " + std::to_string(v.size()) + " fields";
  if (v.is_array()) return "an array of " + std::to_string(v.size()) + " elements";
  std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > io::limits::kMaxQuotedChars) s = s.substr(0, io::limits::kMaxQuotedChars) + "...";
  return s;
}

}  // namespace kiln::format
