#pragma once

// Helpers shared by the storage tests: a temporary directory, a log
// environment (file cache, flusher, manual clock) and batch construction.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "io/file.h"
#include "model/record_batch.h"
#include "storage/batch_builder.h"
#include "storage/file_cache.h"
#include "storage/file_deleter.h"
#include "storage/flusher.h"
#include "storage/log.h"

namespace sluice::storage::testing {

// A fresh directory under $TMPDIR, removed with everything in it.
class temp_dir {
 public:
  temp_dir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "sluice-test-XXXXXX").string();
    SLUICE_ASSERT(::mkdtemp(tmpl.data()) != nullptr, "mkdtemp");
    path_ = tmpl;
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// What a log needs, owned in one place. Destroy logs before the env.
struct log_env {
  explicit log_env(io::filesystem& fs = io::filesystem::posix(), size_t max_open = 64)
      : fs(fs), files(fs, max_open), flush(clk), deleter(fs, clk) {}
  log_context ctx() { return log_context{&fs, &clk, &files, &flush, &deleter, nullptr, follower_cache_drop_behind_bytes}; }

  uint64_t follower_cache_drop_behind_bytes = 0;  // what ctx() hands the logs

  io::filesystem& fs;
  manual_clock clk;
  file_cache files;
  flusher flush;
  file_deleter deleter;
};

// A small config that rolls and indexes often, so tests cross boundaries.
inline log_config small_config() {
  log_config c;
  c.segment_bytes = 4096;
  c.index_interval_bytes = 256;
  c.segment_index_bytes = 1024;
  return c;
}

inline std::vector<std::byte> make_batch(int32_t records, size_t value_bytes, uint32_t seed,
                                         int64_t base_ts = 1'700'000'000'000) {
  batch_spec s;
  s.records = records;
  s.value_bytes = value_bytes;
  s.seed = seed;
  s.base_timestamp = base_ts;
  return build_batch(s);
}

inline model::batch::header header_of(const std::vector<std::byte>& b) { return model::batch::parse(b.data()); }

}  // namespace sluice::storage::testing
