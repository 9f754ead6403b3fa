#pragma once

// The broker-wide cap on open segment files. Segments do not hold their
// .log file open; they ask this cache, which keeps at most `max_open` files
// open and closes the least recently used beyond that. A caller holding a
// shared_ptr (a read region, the flusher) keeps that one descriptor open
// until it lets go, so the true count can exceed the cap by the handles in
// flight, never by idle ones.
//
// Thread-safe.

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "base/result.h"
#include "io/file.h"

namespace sluice::storage {

class file_cache {
 public:
  file_cache(io::filesystem& fs, size_t max_open);

  // The open file at `path` (opened read-write; it must exist).
  result<std::shared_ptr<io::file>> get(const std::string& path);
  // Inserts a file the caller just opened or created.
  std::shared_ptr<io::file> put(const std::string& path, std::unique_ptr<io::file> f);
  // Drops the cached handle of `path` (after a delete or rename).
  void forget(const std::string& path);

  size_t open_count() const;
  size_t max_open() const { return max_open_; }
  uint64_t opens() const;  // files opened so far (tests check reopening)

 private:
  struct slot {
    std::shared_ptr<io::file> file;
    std::list<std::string>::iterator lru;
  };
  void insert_locked(const std::string& path, std::shared_ptr<io::file> f);

  io::filesystem& fs_;
  const size_t max_open_;
  mutable std::mutex mu_;
  std::list<std::string> lru_;  // front: most recently used
  std::unordered_map<std::string, slot> files_;
  uint64_t opens_ = 0;
};

}  // namespace sluice::storage
