#pragma once

// Hands out producer ids for InitProducerId, unique across restarts: ids are
// reserved in blocks, and a block's end is made durable (meta/producer_ids,
// replaced atomically) before any id of it is handed out. A crash wastes at
// most the rest of one block.
//
// Thread safety: thread-safe.

#include <cstdint>
#include <mutex>
#include <string>

#include "base/result.h"
#include "io/file.h"

namespace sluice::cluster {

class producer_id_allocator {
 public:
  static constexpr int64_t block_size = 1000;

  static result<std::unique_ptr<producer_id_allocator>> open(io::filesystem& fs, std::string path);
  result<int64_t> next();

 private:
  producer_id_allocator(io::filesystem& fs, std::string path) : fs_(fs), path_(std::move(path)) {}
  io::filesystem& fs_;
  const std::string path_;
  std::mutex mu_;
  int64_t next_ = 0;       // the next id to hand out
  int64_t reserved_ = 0;   // ids below this are reserved on disk
};

}  // namespace sluice::cluster
