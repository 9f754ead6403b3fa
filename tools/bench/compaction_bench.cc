// Compaction benchmark (see README.md): one clean_log pass over a log of
// keyed records in closed segments, against a raw read of a cached file of
// the same size written to a second file with one fdatasync; alternately.

#include "compaction_bench.h"

#include <cstdio>
#include <filesystem>
#include <random>

#include <fcntl.h>
#include <unistd.h>

#include "base/clock.h"
#include "maintenance/compaction.h"
#include "protocol/records/record_batch.h"
#include "raw_limits.h"
#include "report.h"
#include "storage/log.h"
#include "storage/log_manager.h"

namespace sluice::bench {
namespace {

namespace fs = std::filesystem;
namespace records = protocol::records;

// Seconds of one clean of a freshly built log, and the bytes it read.
std::optional<std::pair<double, uint64_t>> sluice_run(const compaction_options& o,
                                                      const std::string& dir) {
  fs::remove_all(dir);
  storage::log_manager_config mc;
  mc.data_dir = dir;
  mc.default_log.segment_bytes = 64 << 20;
  auto mgr = storage::log_manager::open(io::filesystem::posix(), clock::system(), mc);
  if (!mgr.ok()) return std::nullopt;
  auto lg = (*mgr)->get_or_create({"bench", 0});
  if (!lg.ok()) return std::nullopt;
  std::mt19937 rnd(7);
  const std::vector<uint8_t> value(1024, 'v');
  const uint64_t target = static_cast<uint64_t>(o.mib) << 20;
  uint64_t written = 0;
  while (written < target) {
    std::vector<records::record_input> in(32);
    for (auto& r : in) {
      const std::string k = "key-" + std::to_string(rnd() % static_cast<uint32_t>(o.keys));
      r.key = std::vector<uint8_t>(k.begin(), k.end());
      r.value = value;
      r.timestamp_ms = clock::system().now_ms();
    }
    auto b = records::build_batch({}, in);
    if (!b.ok()) return std::nullopt;
    std::span<std::byte> bytes(reinterpret_cast<std::byte*>(b->data()), b->size());
    if (!(*lg)->append(bytes, leader_epoch(0)).ok()) return std::nullopt;
    written += b->size();
  }
  // Close the last segment: one more record in a new active segment.
  auto cfg = (*lg)->config();
  cfg.segment_ms = 1;
  (void)(*lg)->set_config(cfg);
  ::usleep(2000);
  records::record_input last;
  last.key = std::vector<uint8_t>{'z'};
  last.value = value;
  auto b = records::build_batch({}, std::span(&last, 1));
  std::span<std::byte> bytes(reinterpret_cast<std::byte*>(b->data()), b->size());
  if (!(*lg)->append(bytes, leader_epoch(0)).ok()) return std::nullopt;

  config::topic_config tc;
  tc.cleanup_compact = true;
  tc.segment_bytes = 64 << 20;
  tc.delete_retention_ms = 86'400'000;
  tc.max_compaction_lag_ms = INT64_MAX;
  cluster::offset_map map(128 << 20);
  std::atomic<bool> stop{false};
  const int64_t t0 = now_ns();
  // A single log: every offset is committed.
  auto r = cluster::clean_log(**lg, tc, map, {}, (*lg)->log_end_offset(), {}, clock::system().now_ms(), stop);
  const double secs = static_cast<double>(now_ns() - t0) / 1e9;
  if (!r.ok()) return std::nullopt;
  (void)(*mgr)->shutdown();
  return std::pair{secs, r->bytes_read};
}

// Raw read (cached) plus write with one fdatasync at the end, in MB/s.
std::optional<double> raw_run(const compaction_options& o, const std::string& dir) {
  fs::create_directories(dir);
  const std::string src = dir + "/raw-src", dst = dir + "/raw-dst";
  const uint64_t total = static_cast<uint64_t>(o.mib) << 20;
  if (!write_file(src, total, 1 << 20)) return std::nullopt;
  int in = ::open(src.c_str(), O_RDONLY);
  int out = ::open(dst.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (in < 0 || out < 0) return std::nullopt;
  std::vector<char> buf(1 << 20);
  const int64_t t0 = now_ns();
  uint64_t done = 0;
  while (done < total) {
    ssize_t n = ::pread(in, buf.data(), buf.size(), static_cast<off_t>(done));
    if (n <= 0 || ::write(out, buf.data(), static_cast<size_t>(n)) != n) break;
    done += static_cast<uint64_t>(n);
  }
  ::fdatasync(out);
  const double secs = static_cast<double>(now_ns() - t0) / 1e9;
  ::close(in);
  ::close(out);
  fs::remove(src);
  fs::remove(dst);
  return static_cast<double>(done) / kMB / secs;
}

}  // namespace

int run_compaction(const compaction_options& o) {
  const paired_runs runs = alternate(
      o.repeats,
      [&] {
        auto r = raw_run(o, o.dir + "/raw");
        if (!r) throw bench_error{"the raw read + write failed"};
        return *r;
      },
      [&] {
        auto s = sluice_run(o, o.dir + "/log");
        if (!s) throw bench_error{"the clean failed"};
        return static_cast<double>(s->second) / kMB / s->first;
      });
  fs::remove_all(o.dir + "/log");
  fs::remove_all(o.dir + "/raw");
  const double c = median(runs.sluice), r = median(runs.raw);
  if (o.json) {
    json j = json::object();
    j["mode"] = "compaction";
    j["mib"] = o.mib;
    j["keys"] = o.keys;
    j["cleaner_mb_per_s"] = c;
    j["raw_read_write_mb_per_s"] = r;
    j["ratio"] = ratio(c, r);
    j["load_1m"] = load_average_1m();
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("compaction: %d MiB of 1 KiB records over %d keys, median of %d runs (load %.2f)\n",
                o.mib, o.keys, o.repeats, load_average_1m());
    std::printf("  cleaner            %10s MB/s of log read\n", fixed(c, 1).c_str());
    std::printf("  raw read + write   %10s MB/s\n", fixed(r, 1).c_str());
    std::printf("  ratio              %10s\n", fixed(ratio(c, r), 2).c_str());
  }
  return 0;
}

}  // namespace sluice::bench
