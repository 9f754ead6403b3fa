// Storage benchmark (see README.md): for each batch size, the partition log
// against the raw equivalent with plain system calls on the same directory,
// alternately (report.h, alternate):
//
//   append_fsync     appender threads on one log, each waiting until its
//                    batch is durable (group commit through the flusher);
//                    raw: write(2) + fdatasync every 1 MiB.
//   append_buffered  one appender, fsync off; raw: write(2), never synced.
//   read_cached      log::read regions, each pread into one buffer; raw:
//                    pread of a cached file in the same calls.

#include "storage_bench.h"

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <thread>

#include <fcntl.h>
#include <unistd.h>

#include "base/clock.h"
#include "io/file.h"
#include "raw_limits.h"
#include "report.h"
#include "storage/batch_builder.h"
#include "storage/log.h"
#include "storage/log_manager.h"

namespace sluice::bench {
namespace {

namespace fs = std::filesystem;
using storage::log_manager;

constexpr size_t kRecordValueBytes = 1024;  // "1 KB records"
constexpr uint64_t kSyncEveryBytes = 1 << 20;

// A batch of 1 KB records no larger than `target` bytes.
std::vector<std::byte> make_batch(size_t target) {
  storage::batch_spec spec;
  spec.value_bytes = kRecordValueBytes;
  spec.records = static_cast<int32_t>(std::max<size_t>(1, target / kRecordValueBytes));
  auto b = storage::build_batch(spec);
  while (b.size() > target && spec.records > 1) {
    --spec.records;
    b = storage::build_batch(spec);
  }
  return b;
}

// A log manager in a fresh subdirectory, removed with everything in it when
// the scope ends.
class scratch_log {
 public:
  scratch_log(const std::string& parent, const std::string& name, bool fsync)
      : dir_(parent + "/" + name) {
    fs::remove_all(dir_);
    storage::log_manager_config cfg;
    cfg.data_dir = dir_;
    cfg.default_log.fsync = fsync;
    auto m = log_manager::open(io::filesystem::posix(), clock::system(), cfg);
    if (!m.ok()) throw bench_error{"opening a log manager in " + dir_ + ": " + m.err().message};
    mgr_ = std::move(m).value();
    auto l = mgr_->get_or_create({"bench", 0});
    if (!l.ok()) throw bench_error{"creating a log: " + l.err().message};
    log_ = std::move(l).value();
  }
  ~scratch_log() {
    log_.reset();
    if (mgr_) mgr_->shutdown().ignore();
    mgr_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  storage::log& log() { return *log_; }

 private:
  std::string dir_;
  std::unique_ptr<log_manager> mgr_;
  std::shared_ptr<storage::log> log_;
};

double bytes_per_sec(uint64_t bytes, int64_t t0, int64_t t1) {
  return static_cast<double>(bytes) * 1e9 / static_cast<double>(std::max<int64_t>(t1 - t0, 1));
}

// `appenders` threads append copies of `batch` until `total` bytes are in,
// each waiting for its batch to be durable before the next.
double sluice_append_fsync(const std::string& dir, const std::vector<std::byte>& batch,
                           uint64_t total, int appenders) {
  scratch_log s(dir, "append-fsync", true);
  std::atomic<int64_t> remaining{static_cast<int64_t>(total)};
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<uint64_t> appended{0};
  std::string failure;
  std::mutex failure_mu;
  std::vector<std::thread> ts;
  for (int i = 0; i < appenders; ++i) {
    ts.emplace_back([&] {
      std::vector<std::byte> mine = batch;  // append stamps offsets in place
      ++ready;
      while (!go.load()) std::this_thread::yield();
      while (remaining.fetch_sub(static_cast<int64_t>(mine.size())) > 0) {
        auto r = s.log().append(mine, leader_epoch(0));
        status st = r.ok() ? s.log().wait_durable(r->last) : r.to_status();
        if (!st.ok()) {
          std::lock_guard g(failure_mu);
          failure = st.err().message;
          return;
        }
        appended += mine.size();
      }
    });
  }
  while (ready.load() < appenders) std::this_thread::yield();
  const int64_t t0 = now_ns();
  go = true;
  for (auto& t : ts) t.join();
  const int64_t t1 = now_ns();
  if (!failure.empty()) throw bench_error{"append with fsync: " + failure};
  return bytes_per_sec(appended.load(), t0, t1);
}

double sluice_append_buffered(const std::string& dir, const std::vector<std::byte>& batch,
                              uint64_t total) {
  scratch_log s(dir, "append-buffered", false);
  std::vector<std::byte> mine = batch;
  uint64_t appended = 0;
  const int64_t t0 = now_ns();
  while (appended < total) {
    auto r = s.log().append(mine, leader_epoch(0));
    if (!r.ok()) throw bench_error{"append: " + r.err().message};
    appended += mine.size();
  }
  const int64_t t1 = now_ns();
  return bytes_per_sec(appended, t0, t1);
}

// Reads the whole log through log::read regions, copying each into `buf`.
double sluice_read(storage::log& l, size_t max_bytes, std::vector<char>& buf) {
  offset o = l.log_start_offset();
  const offset end = l.log_end_offset();
  uint64_t got = 0;
  const int64_t t0 = now_ns();
  while (o < end) {
    auto r = l.read(o, max_bytes);
    if (!r.ok()) throw bench_error{"read: " + r.err().message};
    if (r->len == 0) break;
    for (uint64_t done = 0; done < r->len;) {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), r->len - done));
      auto n = r->file->pread(buf.data(), want, r->pos + done);
      if (!n.ok() || *n == 0) throw bench_error{"pread of a region failed"};
      done += *n;
    }
    got += r->len;
    o = r->next_offset;
  }
  const int64_t t1 = now_ns();
  return bytes_per_sec(got, t0, t1);
}

// Appends copies of `batch` to `l` and writes the same bytes to a plain file
// at `raw_path`, one batch to each in turn, until `total` bytes are in each.
void fill_in_turns(storage::log& l, const std::vector<std::byte>& batch,
                   const std::string& raw_path, uint64_t total) {
  fd_guard f(::open(raw_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (f.fd < 0) throw bench_error{os_error("open " + raw_path)};
  auto b = batch;
  for (uint64_t w = 0; w < total; w += b.size()) {
    if (auto r = l.append(b, leader_epoch(0)); !r.ok()) throw bench_error{r.err().message};
    if (!write_all(f.fd, b.data(), b.size())) throw bench_error{os_error("write " + raw_path)};
  }
}

struct row {
  size_t target_kib;   // the nominal batch size
  size_t batch_bytes;  // the actual batch: whole 1 KB records, no larger than the target
  std::string what;    // append_fsync, append_buffered, read_cached
  std::string raw_what;
  paired_runs r;
  double target;  // minimum ratio; 0 when none is set for this row
};

// Spawns this executable as the idle-partitions child and parses its line.
std::optional<std::pair<uint64_t, uint64_t>> idle_rss(const std::string& dir, int partitions,
                                                      std::string& err) {
  const std::string sub = dir + "/idle-partitions";
  std::error_code ec;
  fs::remove_all(sub, ec);
  auto run = [&](const std::string& phase) -> std::string {
    std::string cmd = "'/proc/" + std::to_string(::getpid()) + "/exe' storage-idle-child --dir '" +
                      sub + "' --partitions " + std::to_string(partitions) + " --phase " + phase;
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return {};
    std::string out;
    char buf[256];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    if (::pclose(p) != 0) return "failed: " + out;
    return out;
  };
  std::string c = run("create");
  if (c.rfind("failed", 0) == 0) {
    err = "idle partitions (create): " + c;
    fs::remove_all(sub, ec);
    return std::nullopt;
  }
  std::string h = run("hold");
  fs::remove_all(sub, ec);
  unsigned long long rss = 0, base = 0;
  const auto at = h.find("rss_bytes=");
  if (at == std::string::npos ||
      std::sscanf(h.c_str() + at, "rss_bytes=%llu baseline_rss_bytes=%llu", &rss, &base) != 2) {
    err = "idle partitions (hold): " + h;
    return std::nullopt;
  }
  return std::make_pair<uint64_t, uint64_t>(rss, base);
}

std::string size_name(size_t bytes) {
  if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes >> 10) + " KiB";
}

}  // namespace

int run_idle_child(const std::string& dir, int partitions, const std::string& phase) {
  storage::log_manager_config cfg;
  cfg.data_dir = dir;
  const uint64_t baseline = process_status_bytes(::getpid(), "VmRSS").value_or(0);
  auto m = log_manager::open(io::filesystem::posix(), clock::system(), cfg);
  if (!m.ok()) {
    std::printf("open: %s\n", m.err().message.c_str());
    return 1;
  }
  auto& mgr = **m;
  if (phase == "create") {
    storage::batch_spec spec;
    spec.records = 10;
    spec.value_bytes = 100;
    auto batch = storage::build_batch(spec);
    for (int p = 0; p < partitions; ++p) {
      auto l = mgr.get_or_create({"idle", p});
      if (!l.ok()) {
        std::printf("create: %s\n", l.err().message.c_str());
        return 1;
      }
      auto b = batch;
      if (auto r = (*l)->append(b, leader_epoch(0)); !r.ok()) {
        std::printf("append: %s\n", r.err().message.c_str());
        return 1;
      }
    }
    return mgr.shutdown().ok() ? 0 : 1;
  }
  // "hold": every partition is open (recovered from disk) and idle now.
  if (static_cast<int>(mgr.dir_names().size()) != partitions) {
    std::printf("expected %d partitions, found %zu\n", partitions, mgr.dir_names().size());
    return 1;
  }
  const uint64_t rss = process_status_bytes(::getpid(), "VmRSS").value_or(0);
  std::printf("rss_bytes=%llu baseline_rss_bytes=%llu\n", static_cast<unsigned long long>(rss),
              static_cast<unsigned long long>(baseline));
  return mgr.shutdown().ok() ? 0 : 1;
}

int run_storage(const storage_options& o) {
  std::error_code ec;
  fs::create_directories(o.dir, ec);
  const std::string dir = o.dir + "/sluice-bench-" + std::to_string(::getpid());
  fs::create_directories(dir, ec);
  if (ec) throw bench_error{"cannot create " + dir + ": " + ec.message()};
  struct removed_at_end {
    const std::string& dir;
    ~removed_at_end() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{dir};
  const uint64_t total = o.mib_per_run << 20;
  const double load_before = load_average_1m();
  std::vector<row> rows;
  {
    for (size_t kib : o.batch_kib) {
      const auto batch = make_batch(kib << 10);
      const size_t chunk = batch.size();
      if (!o.json) std::fprintf(stderr, "measuring %zu KiB batches...\n", kib);

      rows.push_back(
          {kib, chunk, "append_fsync", "write+fdatasync every 1 MiB",
           alternate(
               o.repeats,
               [&] { return or_throw(raw_sync_write(dir, total, chunk, kSyncEveryBytes)); },
               [&] { return sluice_append_fsync(dir, batch, total, o.appenders); }),
           kib == 1024 ? 0.85 : 0.0});
      rows.push_back(
          {kib, chunk, "append_buffered", "buffered write",
           alternate(
               o.repeats, [&] { return or_throw(raw_buffered_write(dir, total, chunk)); },
               [&] { return sluice_append_buffered(dir, batch, total); }),
           0.8});
      // Read: the same bytes in a log and in a plain file, both just
      // written and so cached. They are filled in turns, batch by batch:
      // the page cache serves a file written later measurably faster.
      scratch_log s(dir, "read", false);
      const std::string raw_path = dir + "/raw-read.tmp";
      fill_in_turns(s.log(), batch, raw_path, total);
      std::vector<char> buf(std::max<size_t>(o.read_max_bytes, chunk));
      rows.push_back(
          {kib, chunk, "read_cached", "pread of a cached file",
           alternate(
               o.repeats, [&] { return or_throw(raw_cached_read(raw_path, o.read_max_bytes)); },
               [&] { return sluice_read(s.log(), o.read_max_bytes, buf); }),
           0.8});
      ::unlink(raw_path.c_str());
    }
  }

  const double load_after = load_average_1m();
  std::string idle_err;
  auto idle = idle_rss(dir, o.idle_partitions, idle_err);
  if (!idle) throw bench_error{idle_err};
  constexpr double kIdleTargetMiB = 64;

  if (o.json) {
    json j = json::object();
    j["mode"] = "storage";
    j["dir"] = o.dir;
    j["bytes_per_run"] = total;
    j["repeats"] = o.repeats;
    j["appenders"] = o.appenders;
    j["record_value_bytes"] = static_cast<uint64_t>(kRecordValueBytes);
    j["read_max_bytes"] = static_cast<uint64_t>(o.read_max_bytes);
    j["load_average_1m_before"] = load_before;
    j["load_average_1m_after"] = load_after;
    json results = json::array();
    for (const auto& r : rows) {
      json e = json::object();
      e["batch_kib"] = static_cast<uint64_t>(r.target_kib);
      e["batch_bytes"] = static_cast<uint64_t>(r.batch_bytes);
      e["what"] = r.what;
      e["raw_what"] = r.raw_what;
      const double sm = median(r.r.sluice), rm = median(r.r.raw);
      e["sluice_mb_per_s"] = sm / kMB;
      e["raw_mb_per_s"] = rm / kMB;
      e["ratio"] = rm > 0 ? sm / rm : 0.0;
      e["target_ratio"] = r.target > 0 ? json(r.target) : json();
      e["target_met"] = r.target > 0 ? json(rm > 0 && sm / rm >= r.target) : json();
      json sr = json::array(), rr = json::array();
      for (double v : r.r.sluice) sr.push(v / kMB);
      for (double v : r.r.raw) rr.push(v / kMB);
      e["sluice_runs_mb_per_s"] = std::move(sr);
      e["raw_runs_mb_per_s"] = std::move(rr);
      results.push(std::move(e));
    }
    j["results"] = std::move(results);
    json id = json::object();
    id["partitions"] = o.idle_partitions;
    id["rss_mib"] = static_cast<double>(idle->first) / kMiB;
    id["baseline_rss_mib"] = static_cast<double>(idle->second) / kMiB;
    id["target_max_rss_mib"] = kIdleTargetMiB;
    id["target_met"] = static_cast<double>(idle->first) / kMiB <= kIdleTargetMiB;
    j["idle_partitions"] = std::move(id);
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }

  std::printf(
      "sluice-bench storage: dir %s, %llu MiB per run, medians of %d runs alternating raw and "
      "Sluice\n",
      o.dir.c_str(), static_cast<unsigned long long>(o.mib_per_run), o.repeats);
  std::printf(
      "after one warm-up pair; 1 KB records; %d appenders share fsyncs; reads of %zu KiB per "
      "call\n",
      o.appenders, o.read_max_bytes >> 10);
  std::printf("load average (1 min) %.2f before, %.2f after\n\n", load_before, load_after);
  std::printf("%-10s %-16s %12s %12s  %-30s %6s %8s\n", "batch", "what", "sluice MB/s", "raw MB/s",
              "raw limit", "ratio", "target");
  for (const auto& r : rows) {
    const double sm = median(r.r.sluice), rm = median(r.r.raw);
    const double ratio = rm > 0 ? sm / rm : 0;
    std::string target =
        r.target > 0 ? (">=" + fixed(r.target) + (ratio >= r.target ? " met" : " MISSED")) : "-";
    std::printf("%-10s %-16s %12.0f %12.0f  %-30s %6.2f %s\n",
                size_name(r.target_kib << 10).c_str(), r.what.c_str(), sm / kMB, rm / kMB,
                r.raw_what.c_str(), ratio, target.c_str());
  }
  const double idle_mib = static_cast<double>(idle->first) / kMiB;
  std::printf(
      "\n%d idle partitions open: RSS %.1f MiB (process before opening them: %.1f MiB), target <= "
      "%.0f MiB %s\n",
      o.idle_partitions, idle_mib, static_cast<double>(idle->second) / kMiB, kIdleTargetMiB,
      idle_mib <= kIdleTargetMiB ? "met" : "MISSED");
  return 0;
}

}  // namespace sluice::bench
