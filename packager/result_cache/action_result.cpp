// The result cache's entry: a Bazel remote execution API v2 ActionResult naming one output file,
// written and read in protobuf's wire format by hand (three messages, four fields: a protobuf
// library would be a dependency for 100 lines). Reading is bounded by the bytes given and never
// trusts a length it has not checked against them.
//
//   ActionResult { repeated OutputFile output_files = 2; ... }
//   OutputFile   { string path = 1; Digest digest = 2; ... }
//   Digest       { string hash = 1; int64 size_bytes = 2; }
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "result_cache/result_cache.hpp"

namespace kiln::result_cache {

namespace {

enum WireType : unsigned { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_bytes(std::string& out, unsigned field, std::string_view bytes) {
  put_varint(out, (field << 3) | kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

// One message's fields, in order; throws Error{Format} naming the origin on malformed bytes.
class WireReader {
 public:
  WireReader(std::string_view bytes, const std::string& origin) : in_(bytes), origin_(origin) {}
  bool done() const { return at_ == in_.size(); }

  // The next field's number and wire type.
  std::pair<unsigned, unsigned> next_tag() {
    std::uint64_t tag = varint();
    unsigned field = static_cast<unsigned>(tag >> 3);
    if (field == 0 || tag >> 3 > 0x1fffffff) fail("field number 0 or out of range");
    return {field, static_cast<unsigned>(tag & 7)};
  }
  std::uint64_t varint() {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at_ >= in_.size()) fail("a varint runs past the end");
      auto b = static_cast<unsigned char>(in_[at_++]);
      v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    fail("a varint longer than 10 bytes");
    return 0;
  }
  std::string_view length_delimited() {
    std::uint64_t n = varint();
    if (n > in_.size() - at_) fail("a field's length runs past the end");
    std::string_view out = in_.substr(at_, n);
    at_ += n;
    return out;
  }
  void skip(unsigned wire_type) {
    switch (wire_type) {
      case kVarint:
        varint();
        return;
      case kLengthDelimited:
        length_delimited();
        return;
      case kFixed64:
      case kFixed32: {
        std::size_t n = wire_type == kFixed64 ? 8 : 4;
        if (n > in_.size() - at_) fail("a fixed-size field runs past the end");
        at_ += n;
        return;
      }
      default:
        fail("wire type " + std::to_string(wire_type) + " (groups are not read)");
    }
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorKind::Format, origin_ + ": not a Bazel ActionResult: " + what);
  }

 private:
  std::string_view in_;
  std::size_t at_ = 0;
  const std::string& origin_;
};

void read_digest(std::string_view bytes, const std::string& origin, CachedOutput& out) {
  WireReader r(bytes, origin);
  while (!r.done()) {
    auto [field, type] = r.next_tag();
    if (field == 1 && type == kLengthDelimited)
      out.sha256 = std::string(r.length_delimited());
    else if (field == 2 && type == kVarint)
      out.size = r.varint();
    else
      r.skip(type);
  }
  if (!io::is_sha256_hex(out.sha256))
    r.fail("the output's digest is not 64 lowercase hex digits (another hash function?)");
}

CachedOutput read_output_file(std::string_view bytes, const std::string& origin) {
  WireReader r(bytes, origin);
  CachedOutput out;
  bool digest = false;
  while (!r.done()) {
    auto [field, type] = r.next_tag();
    if (field == 1 && type == kLengthDelimited) {
      out.name = std::string(r.length_delimited());
    } else if (field == 2 && type == kLengthDelimited) {
      read_digest(r.length_delimited(), origin, out);
      digest = true;
    } else {
      r.skip(type);
    }
  }
  if (!digest) r.fail("its output file has no digest");
  return out;
}

}  // namespace

std::string encode_action_result(const CachedOutput& out) {
  std::string digest;
  put_bytes(digest, 1, out.sha256);
  put_varint(digest, (2u << 3) | kVarint);
  put_varint(digest, out.size);
  std::string file;
  put_bytes(file, 1, out.name);
  put_bytes(file, 2, digest);
  std::string result;
  put_bytes(result, 2, file);
  return result;
}

CachedOutput decode_action_result(std::string_view bytes, const std::string& origin) {
  WireReader r(bytes, origin);
  std::optional<CachedOutput> found;
  int files = 0;
  while (!r.done()) {
    auto [field, type] = r.next_tag();
    if (field == 2 && type == kLengthDelimited) {
      ++files;
      found = read_output_file(r.length_delimited(), origin);
    } else {
      r.skip(type);
    }
  }
  if (files != 1) r.fail("it names " + std::to_string(files) + " output files, not one");
  return *found;
}

std::string action_path(const std::string& key) { return "ac/" + key; }
std::string blob_path(const std::string& sha256) { return "cas/" + sha256; }

}  // namespace kiln::result_cache
