#pragma once
// Process-wide memory of what the store tier read from disk (a store's archive directories, a
// parsed manifest.json), reused while the file or directory keeps its identity: device, inode,
// size, mtime and ctime in nanoseconds. A cold get() then costs one stat() per store and per
// manifest instead of a directory listing and a read + parse. Artifact bytes are never cached:
// every load still reads and hashes them (docs/rules.md, Verified bytes only).
//
// Timestamps have the kernel's coarse clock granularity (a few ms), so a change in place right
// after a read can leave mtime as it was. As git does with its index ("racy" entries), only a
// settled entry of what changes in place is remembered: one whose mtime and ctime were at least
// kSettledNs before the read began. Any later change then gets a later timestamp, and the
// identity differs. A file that is never rewritten in place (a new version is a new file, renamed
// over the old: another inode) is remembered as soon as it is read (Rewrites::never).
#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace kiln::io {

struct FileIdentity {
  std::uint64_t dev = 0;
  std::uint64_t ino = 0;
  std::int64_t size = 0;
  std::int64_t mtime_ns = 0;
  std::int64_t ctime_ns = 0;
  bool operator==(const FileIdentity& o) const {
    return dev == o.dev && ino == o.ino && size == o.size && mtime_ns == o.mtime_ns &&
           ctime_ns == o.ctime_ns;
  }
};

constexpr std::int64_t kSettledNs = 1'000'000'000;

// stat(path) (following symlinks); nullopt when it fails.
std::optional<FileIdentity> identity_of(const std::string& path);
// The identity a stat() or fstat() gave.
FileIdentity identity_of(const struct stat& st);
// CLOCK_REALTIME now, in ns: the clock file timestamps come from.
std::int64_t realtime_ns();

// Pure: whether an entry with identity `id`, read at or after `read_start_ns`, may be
// remembered (both timestamps at least `margin_ns`, by default kSettledNs, older than the read).
inline bool settled(const FileIdentity& id, std::int64_t read_start_ns,
                    std::int64_t margin_ns = kSettledNs) {
  return id.mtime_ns <= read_start_ns - margin_ns && id.ctime_ns <= read_start_ns - margin_ns;
}

// How what a cache remembers changes on disk.
enum class Rewrites {
  in_place,  // a directory gaining and losing entries: only settled entries are remembered
  never,     // a file replaced by renaming a new one over it, as kiln writes a store's archives
};

// path -> (identity, value). Thread-safe; bounded (cleared when it reaches kMaxEntries).
template <typename T>
class IdentityCache {
 public:
  static constexpr std::size_t kMaxEntries = 256;

  explicit IdentityCache(Rewrites rewrites = Rewrites::in_place) : rewrites_(rewrites) {}

  // The value remembered for `path` while it still has identity `id`; nullptr otherwise.
  std::shared_ptr<const T> find(const std::string& path, const FileIdentity& id) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(path);
    if (it == map_.end() || !(it->second.id == id)) return nullptr;
    return it->second.value;
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    map_.clear();
  }
  // Remembers `value` as what `path` held with identity `id` (taken before the read that
  // produced it, at `read_start_ns`); an unsettled entry of what changes in place is forgotten
  // instead.
  void put(const std::string& path, const FileIdentity& id, std::int64_t read_start_ns,
           std::shared_ptr<const T> value) {
    std::lock_guard<std::mutex> lock(mu_);
    if (rewrites_ == Rewrites::in_place && !settled(id, read_start_ns)) {
      map_.erase(path);
      return;
    }
    if (map_.size() >= kMaxEntries) map_.clear();
    map_[path] = Entry{id, std::move(value)};
  }

 private:
  struct Entry {
    FileIdentity id;
    std::shared_ptr<const T> value;
  };
  const Rewrites rewrites_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> map_;
};

}  // namespace kiln::io
