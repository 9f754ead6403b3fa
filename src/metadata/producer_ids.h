#pragma once

// Hands out producer ids for InitProducerId, unique across restarts: ids are
// reserved in blocks, and a block's end is made durable (meta/producer_ids,
// replaced atomically) before any id of it is handed out. A crash wastes at
// most the rest of one block. In a cluster the blocks come from the
// cluster's store instead (set_block_source), so that no two brokers hand
// out the same id: a producer's id then means one producer on every
// replica, and its retry to a new leader is recognised.
//
// Thread safety: thread-safe.

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "base/result.h"
#include "io/file.h"

namespace sluice::cluster {

class producer_id_allocator {
 public:
  static constexpr int64_t block_size = 1000;

  static result<std::unique_ptr<producer_id_allocator>> open(io::filesystem& fs, std::string path);
  // The next id, reserving a new block first when the current one is used
  // up: that writes the local file (fsync) or asks the block source (etcd),
  // and so may block.
  result<int64_t> next();
  // The next id when the current block has one, without blocking; nullopt
  // when the next id needs a new block (next() reserves it).
  std::optional<int64_t> try_next();
  // Reserves `count` ids for this broker alone and returns the first.
  using block_source = std::function<result<int64_t>(int64_t count)>;
  // From now on blocks come from `source` (a cluster), not the local file.
  void set_block_source(block_source source);

 private:
  producer_id_allocator(io::filesystem& fs, std::string path) : fs_(fs), path_(std::move(path)) {}
  io::filesystem& fs_;
  const std::string path_;
  std::mutex mu_;
  int64_t next_ = 0;       // the next id to hand out
  int64_t reserved_ = 0;   // ids below this are reserved on disk (or from the source)
  block_source source_;
};

}  // namespace sluice::cluster
