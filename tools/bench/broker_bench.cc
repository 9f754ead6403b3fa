// Broker benchmark, OpenMessaging style (see README.md): per run a fresh
// topic, one producer and one tailing consumer in this process (librdkafka)
// for a fixed time at a fixed or unlimited rate; then catch-up consumers
// read the whole topic from the page cache as fast as they can, and a bare
// Fetch loop (fetch_only.h) reads it once more without parsing records.
// Each run is preceded by the raw limits (raw_limits.h) on the same disk
// and loopback interface, after one uncounted raw warm-up; figures are
// medians over runs.

#include "broker_bench.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include <librdkafka/rdkafka.h>
#include <unistd.h>

#include "base/limits.h"
#include "consume_phase.h"
#include "fetch_only.h"
#include "kafka_util.h"
#include "produce_phase.h"
#include "raw_limits.h"
#include "report.h"

namespace sluice::bench {
namespace {

constexpr size_t kRawChunk = 1 << 20;
constexpr uint64_t kBurstBytes = 256ull << 20;
// The raw sendfile stream's file: in the page cache, and larger than a
// CPU's caches.
constexpr uint64_t kSendfileFileBytes = 64ull << 20;
constexpr int kKeyCount = 1000;
// Messages per second for the group-commit floor of an unlimited-rate run:
// the rate of the latency targets.
constexpr double kFloorRate = 50'000;

// ---- One run ------------------------------------------------------------------

struct run_result {
  double produce_msgs = 0, produce_bytes = 0;  // per second
  uint64_t acked = 0, failed = 0;
  std::string produce_error;
  double pub_p50 = 0, pub_p99 = 0, pub_p999 = 0, pub_max = 0;  // ms
  double e2e_p50 = 0, e2e_p99 = 0;                             // ms
  double consume_msgs = 0, consume_bytes = 0;                  // catch-up, per second
  // The catch-up read again by one consumer, when the one above had more;
  // 0 otherwise.
  double consume_one_msgs = 0, consume_one_bytes = 0;
  double tail_msgs = 0;                                     // tailing consumer, per second
  double broker_cpu_produce = -1, broker_cpu_consume = -1;  // cores busy
  double client_cpu_produce = -1;
  // Catch-up consume: the whole client process, and its busiest thread
  // (librdkafka's fetch thread for the broker).
  double client_cpu_consume = -1, client_thread_max_consume = -1;
  double fetch_only_msgs = 0, fetch_only_bytes = 0;  // the bare Fetch loop, per second
  double broker_cpu_fetch_only = -1;
  double schedule_lag_max_ms = 0;  // fixed rate: how far the sender fell behind its schedule
};

run_result run_once(const broker_options& o, int consumers, const broker_handle& b,
                    const std::string& topic) {
  create_topic(b.bootstrap, topic, o.partitions);
  run_result r;

  std::atomic<bool> producing{true};
  std::atomic<uint64_t> expected{0};
  consume_result tail;
  const int64_t tail_deadline = now_ns() + static_cast<int64_t>((o.seconds + 90) * 1e9);
  std::atomic<bool> tail_ready{false};
  std::thread tail_thread([&] {
    consume(b.bootstrap, topic, {0, o.partitions}, true, producing, expected, tail_deadline, tail,
            nullptr, &tail_ready);
  });
  // Like OMB, start producing once the consumer is in place: assigned, and
  // given half a second to connect and send its first fetch.
  while (!tail_ready.load()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));

  produce_spec spec;
  spec.bootstrap = b.bootstrap;
  spec.topic = topic;
  spec.acks = o.acks;
  spec.props = o.producer_props;
  spec.rate = o.rate;
  spec.seconds = o.seconds;
  spec.message_bytes = o.message_bytes;
  spec.key_count = o.keys ? kKeyCount : 0;
  spec.broker_pid = b.pid;
  produce_stats ps;
  try {
    ps = produce_phase(spec);
  } catch (const bench_error&) {
    producing = false;
    tail_thread.join();
    throw;
  }
  const auto payload_bytes = static_cast<double>(std::max<size_t>(o.message_bytes, 8));
  r.acked = ps.acked;
  r.failed = ps.failed;
  r.produce_error = ps.first_error;
  r.produce_msgs = ps.msgs_per_s;
  r.produce_bytes = ps.bytes_per_s;
  r.pub_p50 = percentile_sorted(ps.publish_ms, 50);
  r.pub_p99 = percentile_sorted(ps.publish_ms, 99);
  r.pub_p999 = percentile_sorted(ps.publish_ms, 99.9);
  r.pub_max = ps.publish_ms.empty() ? 0 : ps.publish_ms.back();
  r.broker_cpu_produce = ps.broker_cores;
  r.client_cpu_produce = ps.client_cores;
  r.schedule_lag_max_ms = ps.schedule_lag_max_ms;
  expected = r.acked;
  producing = false;
  tail_thread.join();
  if (!tail.error.empty()) throw bench_error{"tailing consumer: " + tail.error};
  if (tail.messages < r.acked)
    throw bench_error{"tailing consumer got " + std::to_string(tail.messages) + " of " +
                      std::to_string(r.acked) + " messages"};
  std::sort(tail.e2e_ms.begin(), tail.e2e_ms.end());
  r.e2e_p50 = percentile_sorted(tail.e2e_ms, 50);
  r.e2e_p99 = percentile_sorted(tail.e2e_ms, 99);
  r.tail_msgs = consume_rate(tail);

  // Catch-up read of everything, now in the page cache, by `consumers`
  // consumers; and, when that is more than one, by one consumer alone.
  const catch_up_result cu =
      catch_up(b.bootstrap, topic, o.partitions, consumers, r.acked, {b.pid});
  r.consume_msgs = cu.msgs;
  r.consume_bytes = r.consume_msgs * payload_bytes;
  r.broker_cpu_consume = cu.broker_cpu;
  r.client_cpu_consume = cu.client_cpu;
  r.client_thread_max_consume = cu.client_thread_max;
  if (consumers != 1) {
    r.consume_one_msgs = catch_up(b.bootstrap, topic, o.partitions, 1, r.acked, {b.pid}).msgs;
    r.consume_one_bytes = r.consume_one_msgs * payload_bytes;
  }

  const auto fcpu0 = process_cpu_seconds(b.pid);
  const int64_t f0 = now_ns();
  auto fo = fetch_only(b.bootstrap, topic, o.partitions);
  const auto fcpu1 = process_cpu_seconds(b.pid);
  if (auto e = std::get_if<std::string>(&fo)) throw bench_error{*e};
  const auto& f = std::get<fetch_only_result>(fo);
  if (f.records < r.acked)
    throw bench_error{"fetch-only read got " + std::to_string(f.records) + " of " +
                      std::to_string(r.acked)};
  if (f.seconds > 0) {
    r.fetch_only_msgs = static_cast<double>(f.records) / f.seconds;
    r.fetch_only_bytes = r.fetch_only_msgs * payload_bytes;
  }
  r.broker_cpu_fetch_only = cores_between(fcpu0, fcpu1, f0, now_ns());
  delete_topic(b.bootstrap, topic);
  return r;
}

// ---- The raw limits before each run ---------------------------------------------

struct raw_result {
  double sync = 0, sync_burst = 0;  // write + fdatasync every 1 MiB for `seconds`, its first part
  double tcp = 0, tcp_reno = 0, sendfile = 0;          // loopback; reno 0 when it failed
  double fsync_p50 = 0, fsync_p99 = 0;                 // one 4 KiB write + fdatasync, ms
  double round_p50 = 0, round_p99 = 0, round_max = 0;  // one on every partition's file, ms
  double floor_p99 = 0, floor_p999 = 0;                // the group-commit floor, ms
};

// Files removed when it goes (those already gone are skipped).
struct removed_at_end {
  std::vector<std::string> paths;
  removed_at_end() = default;
  removed_at_end(const removed_at_end&) = delete;
  removed_at_end& operator=(const removed_at_end&) = delete;
  ~removed_at_end() {
    for (const auto& p : paths) ::unlink(p.c_str());
  }
};

// The write + fdatasync runs as long as a produce phase, since the disk
// takes a burst far faster than it sustains; its file is kept in
// `raw_files` until every figure is measured, since deleting gigabytes
// stalls the disk (raw_sync_write_for). `reno_error` says why the reno
// stream failed, when it did (not fatal: no target uses it).
raw_result measure_raw(const broker_options& o, const std::string& dir, int floor_files,
                       double seconds, removed_at_end& raw_files, std::string& reno_error) {
  raw_result r;
  raw_files.paths.push_back(dir + "/raw-write-" + std::to_string(raw_files.paths.size()) + ".tmp");
  auto s = raw_sync_write_for(raw_files.paths.back(), seconds, o.raw_sync_mib << 20, kRawChunk,
                              kRawChunk, kBurstBytes);
  if (auto e = std::get_if<std::string>(&s)) throw bench_error{*e};
  r.sync = std::get<timed_write>(s).bytes_per_s;
  r.sync_burst = std::get<timed_write>(s).first_bytes_per_s;
  r.tcp = or_throw(loopback_tcp(o.tcp_seconds, kRawChunk));
  r.sendfile = or_throw(loopback_sendfile(dir, o.tcp_seconds, kRawChunk, kSendfileFileBytes));
  auto reno = loopback_tcp(o.tcp_seconds, kRawChunk, "reno");
  if (auto v = std::get_if<double>(&reno))
    r.tcp_reno = *v;
  else
    reno_error = std::get<std::string>(reno);

  std::string err;
  auto lat = raw_fsync_latencies_ms(dir, 500, 2.0, err);
  if (!err.empty()) throw bench_error{err};
  r.fsync_p50 = percentile_sorted(lat, 50);
  r.fsync_p99 = percentile_sorted(lat, 99);
  // The floor's rounds touch as many files as the run has partitions taking
  // messages at once, for as long as a produce phase: a rare stall leaves
  // the p99 of a short sample alone but holds up every message behind it.
  const auto rounds =
      raw_fsync_rounds(dir, floor_files, limits::flusher_threads, INT_MAX, seconds, err);
  if (!err.empty()) throw bench_error{err};
  // A round over every partition, as a keyed produce waits among.
  const auto every =
      floor_files == o.partitions
          ? rounds
          : raw_fsync_rounds(dir, o.partitions, limits::flusher_threads, 500, 2.0, err);
  if (!err.empty()) throw bench_error{err};
  const auto round = round_latencies_ms(every);
  r.round_p50 = percentile_sorted(round, 50);
  r.round_p99 = percentile_sorted(round, 99);
  r.round_max = round.empty() ? 0 : round.back();
  const auto floor =
      group_commit_floor_ms(rounds, static_cast<int64_t>(1e9 / (o.rate > 0 ? o.rate : kFloorRate)));
  r.floor_p99 = percentile_sorted(floor, 99);
  r.floor_p999 = percentile_sorted(floor, 99.9);
  return r;
}

}  // namespace

int run_broker(const broker_options& o) {
  // Catch-up consumers, each its own librdkafka client (OMB's consumers per
  // subscription): one per core, at most one per partition. librdkafka
  // fetches for a broker on one thread, one fetch at a time, so one consumer
  // alone is bound by that thread; its figure is printed beside.
  const int consumers =
      std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, o.partitions);
  const int floor_files = partitions_taking_messages(o.partitions, o.keys, o.producer_props);
  const std::string congestion = default_congestion_control();
  std::string reno_error;
  std::vector<raw_result> raws;
  std::vector<run_result> runs;
  broker_handle b;
  uint64_t peak_rss = 0;
  const double load_before = load_average_1m();
  b = open_broker(o.broker);
  {
    removed_at_end raw_files;  // declared after the broker: removed before it stops
    std::atomic<uint64_t> sampled_peak{0};
    std::optional<repeat_thread> rss;
    if (b.pid > 0)
      rss.emplace([&] {
        sampled_peak = std::max<uint64_t>(sampled_peak.load(),
                                          process_status_bytes(b.pid, "VmRSS").value_or(0));
      });
    measure_raw(o, b.data_dir, floor_files, 0.5, raw_files, reno_error);  // warm-up
    for (int i = 0; i < o.repeats; ++i) {
      raws.push_back(measure_raw(o, b.data_dir, floor_files, o.seconds, raw_files, reno_error));
      if (!o.json) std::fprintf(stderr, "run %d of %d...\n", i + 1, o.repeats);
      runs.push_back(run_once(
          o, consumers, b, "sluice-bench-" + std::to_string(::getpid()) + "-" + std::to_string(i)));
    }
    rss.reset();
    if (b.pid > 0)
      peak_rss = std::max(process_status_bytes(b.pid, "VmHWM").value_or(0), sampled_peak.load());
  }
  const bool started = b.process != nullptr;
  const pid_t pid = b.pid;
  b.process.reset();  // stops the broker we started
  const double load_after = load_average_1m();

  auto med = [&](double run_result::*f) { return median_of(runs, f); };
  auto raw = [&](double raw_result::*f) { return median_of(raws, f); };
  const double sync_mb = raw(&raw_result::sync) / kMB, tcp_mb = raw(&raw_result::tcp) / kMB,
               sendfile_mb = raw(&raw_result::sendfile) / kMB;
  // 0 when no reno stream ran (reno_error says why), or when the cap on the
  // raw write came before its first 256 MiB.
  const double reno_mb = reno_error.empty() ? raw(&raw_result::tcp_reno) / kMB : 0;
  const double burst_mb = raw(&raw_result::sync_burst) / kMB;
  const double prod_mb = med(&run_result::produce_bytes) / kMB,
               cons_mb = med(&run_result::consume_bytes) / kMB,
               cons_one_mb = med(&run_result::consume_one_bytes) / kMB,  // 0: not read
      fetch_mb = med(&run_result::fetch_only_bytes) / kMB;
  const double rss_mib = static_cast<double>(peak_rss) / kMiB;
  uint64_t failed = 0;
  std::string perr;
  for (const auto& r : runs) {
    failed += r.failed;
    if (perr.empty()) perr = r.produce_error;
  }
  // Which targets apply to this configuration (the are for 16
  // partitions, acks=all, unlimited rate; latency at 50,000 msgs/s).
  const bool tput_cfg = o.partitions == 16 && o.rate == 0 && (o.acks == "all" || o.acks == "-1");
  const bool lat_cfg = o.rate == 50'000;
  const double pub_p99 = med(&run_result::pub_p99), pub_p999 = med(&run_result::pub_p999);
  auto if_positive = [](double v) { return v > 0 ? json(v) : json(); };

  if (o.json) {
    json j = json::object();
    j["mode"] = "broker";
    j["bootstrap"] = started ? "started" : o.broker.bootstrap;
    j["partitions"] = o.partitions;
    j["keys"] = o.keys;
    j["rate_msgs_per_s"] = if_positive(o.rate);
    j["seconds"] = o.seconds;
    j["repeats"] = o.repeats;
    j["message_bytes"] = static_cast<uint64_t>(o.message_bytes);
    j["acks"] = o.acks;
    j["catch_up_consumers"] = consumers;
    j["load_average_1m_before"] = load_before;
    j["load_average_1m_after"] = load_after;
    j["produce_msgs_per_s"] = med(&run_result::produce_msgs);
    j["produce_mb_per_s"] = prod_mb;
    j["produce_failed_messages"] = failed;
    j["consume_msgs_per_s"] = med(&run_result::consume_msgs);
    j["consume_mb_per_s"] = cons_mb;
    j["consume_one_consumer_mb_per_s"] = if_positive(cons_one_mb);
    j["tailing_consume_msgs_per_s"] = med(&run_result::tail_msgs);
    j["fetch_only_msgs_per_s"] = med(&run_result::fetch_only_msgs);
    j["fetch_only_mb_per_s"] = fetch_mb;
    json pub = json::object();
    pub["p50"] = med(&run_result::pub_p50);
    pub["p99"] = pub_p99;
    pub["p99_9"] = pub_p999;
    pub["max"] = med(&run_result::pub_max);
    j["publish_latency_ms"] = std::move(pub);
    json e2e = json::object();
    e2e["p50"] = med(&run_result::e2e_p50);
    e2e["p99"] = med(&run_result::e2e_p99);
    j["end_to_end_latency_ms"] = std::move(e2e);
    j["schedule_lag_max_ms"] = med(&run_result::schedule_lag_max_ms);
    j["broker_cpu_cores_produce"] = cores_json(med(&run_result::broker_cpu_produce));
    j["broker_cpu_cores_consume"] = cores_json(med(&run_result::broker_cpu_consume));
    j["broker_cpu_cores_fetch_only"] = cores_json(med(&run_result::broker_cpu_fetch_only));
    j["client_cpu_cores_produce"] = cores_json(med(&run_result::client_cpu_produce));
    j["client_cpu_cores_consume"] = cores_json(med(&run_result::client_cpu_consume));
    j["client_busiest_thread_cores_consume"] =
        cores_json(med(&run_result::client_thread_max_consume));
    j["broker_peak_rss_mib"] = pid > 0 ? json(rss_mib) : json();
    json rw = json::object();
    rw["fdatasync_write_mb_per_s"] = sync_mb;
    rw["fdatasync_write_seconds"] = o.seconds;
    rw["fdatasync_write_first_256_mib_mb_per_s"] = if_positive(burst_mb);
    rw["loopback_tcp_mb_per_s"] = tcp_mb;
    rw["loopback_tcp_congestion_control"] = congestion;
    rw["loopback_tcp_reno_mb_per_s"] = if_positive(reno_mb);
    rw["loopback_sendfile_mb_per_s"] = sendfile_mb;
    rw["fdatasync_4k_latency_p50_ms"] = raw(&raw_result::fsync_p50);
    rw["fdatasync_4k_latency_p99_ms"] = raw(&raw_result::fsync_p99);
    rw["fdatasync_4k_every_partition_round_p50_ms"] = raw(&raw_result::round_p50);
    rw["fdatasync_4k_every_partition_round_p99_ms"] = raw(&raw_result::round_p99);
    rw["fdatasync_4k_every_partition_round_max_ms"] = raw(&raw_result::round_max);
    rw["group_commit_floor_files"] = floor_files;
    rw["group_commit_floor_p99_ms"] = raw(&raw_result::floor_p99);
    rw["group_commit_floor_p99_9_ms"] = raw(&raw_result::floor_p999);
    j["raw"] = std::move(rw);
    json rat = json::object();
    rat["produce_vs_fdatasync_write"] = ratio(prod_mb, sync_mb);
    rat["produce_vs_fdatasync_write_first_256_mib"] = if_positive(ratio(prod_mb, burst_mb));
    rat["consume_vs_loopback_tcp"] = ratio(cons_mb, tcp_mb);
    rat["consume_one_consumer_vs_loopback_tcp"] = if_positive(ratio(cons_one_mb, tcp_mb));
    rat["consume_vs_loopback_tcp_reno"] = if_positive(ratio(cons_mb, reno_mb));
    rat["fetch_only_vs_loopback_tcp"] = ratio(fetch_mb, tcp_mb);
    rat["fetch_only_vs_loopback_sendfile"] = ratio(fetch_mb, sendfile_mb);
    rat["consume_vs_loopback_sendfile"] = ratio(cons_mb, sendfile_mb);
    j["ratios"] = std::move(rat);
    json tg = json::object();
    if (tput_cfg) {
      tg["produce_ratio_min_0_6"] = ratio(prod_mb, sync_mb) >= 0.6;
      tg["consume_ratio_min_0_4"] = ratio(cons_mb, tcp_mb) >= 0.4;
    }
    if (lat_cfg) {
      tg["publish_p99_under_5_ms"] = pub_p99 < 5;
      tg["publish_p99_9_under_20_ms"] = pub_p999 < 20;
    }
    if (pid > 0) tg["broker_rss_under_512_mib"] = rss_mib < 512;
    j["targets_met"] = std::move(tg);
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }

  std::printf(
      "sluice-bench broker: %s, topic of %d partitions, %zu B messages, %s keys, acks=%s, %s, %.3g "
      "s runs\n",
      started ? "started broker" : o.broker.bootstrap.c_str(), o.partitions, o.message_bytes,
      o.keys ? "with" : "without", o.acks.c_str(),
      o.rate > 0 ? ("rate " + fixed(o.rate, 0) + " msgs/s").c_str() : "unlimited rate", o.seconds);
  std::printf(
      "medians of %d runs, each after the raw limits (one raw warm-up first); load average (1 min) "
      "%.2f before, %.2f after\n\n",
      o.repeats, load_before, load_after);
  // One throughput figure beside its raw limit.
  auto row = [](const char* what, double msgs, double mb, const char* raw_what, double raw_mb,
                const std::string& target) {
    std::printf("%-12s %10.0f msgs/s %8.1f MB/s   raw %-22s %8.1f MB/s  ratio %.2f  %s\n", what,
                msgs, mb, raw_what, raw_mb, ratio(mb, raw_mb), target.c_str());
  };
  row("produce", med(&run_result::produce_msgs), prod_mb, "write+fdatasync/1MiB", sync_mb,
      "target >= 0.60 " + verdict(tput_cfg, ratio(prod_mb, sync_mb) >= 0.6));
  if (burst_mb > 0)
    std::printf("  (raw write for %.0f s; its first 256 MiB alone: %.1f MB/s, ratio %.2f)\n",
                o.seconds, burst_mb, ratio(prod_mb, burst_mb));
  row("consume", med(&run_result::consume_msgs), cons_mb, "loopback TCP", tcp_mb,
      "target >= 0.40 " + verdict(tput_cfg, ratio(cons_mb, tcp_mb) >= 0.4));
  std::printf(
      "  (catch-up read from cache by %d consumer%s; the tailing consumer averaged %.0f msgs/s)\n",
      consumers, consumers == 1 ? "" : "s sharing the partitions", med(&run_result::tail_msgs));
  if (cons_one_mb > 0)
    std::printf("  (one consumer alone: %.1f MB/s, ratio %.2f)\n", cons_one_mb,
                ratio(cons_one_mb, tcp_mb));
  if (reno_mb > 0)
    std::printf(
        "  (loopback TCP under %s, as the broker's sockets; under reno %.1f MB/s, ratio %.2f)\n",
        congestion.c_str(), reno_mb, ratio(cons_mb, reno_mb));
  else
    std::printf("  (loopback TCP under %s; the reno stream failed: %s)\n", congestion.c_str(),
                reno_error.c_str());
  row("fetch only", med(&run_result::fetch_only_msgs), fetch_mb, "loopback sendfile", sendfile_mb,
      "");
  std::printf(
      "  (bare Fetch v11 requests shaped like librdkafka's, records not parsed: the broker's part "
      "of the consume;\n   the catch-up consume is %.2f of the sendfile stream)\n",
      ratio(cons_mb, sendfile_mb));
  if (failed)
    std::printf("produce failures: %llu (first: %s)\n", static_cast<unsigned long long>(failed),
                perr.c_str());
  std::printf(
      "publish latency ms   p50 %.2f  p99 %.2f  p99.9 %.2f  max %.2f   targets p99 < 5 %s, p99.9 < "
      "20 %s\n",
      med(&run_result::pub_p50), pub_p99, pub_p999, med(&run_result::pub_max),
      verdict(lat_cfg, pub_p99 < 5).c_str(), verdict(lat_cfg, pub_p999 < 20).c_str());
  std::printf(
      "  (raw: 4 KiB write + fdatasync p50 %.2f ms, p99 %.2f ms; on each of %d files by %d threads "
      "p50 %.2f, p99 %.2f, max %.2f ms;\n"
      "   group-commit floor on %d file%s at %.0f msgs/s for %.3g s: p99 %.2f ms, p99.9 %.2f ms)\n",
      raw(&raw_result::fsync_p50), raw(&raw_result::fsync_p99), o.partitions,
      limits::flusher_threads, raw(&raw_result::round_p50), raw(&raw_result::round_p99),
      raw(&raw_result::round_max), floor_files, floor_files == 1 ? "" : "s",
      o.rate > 0 ? o.rate : kFloorRate, o.seconds, raw(&raw_result::floor_p99),
      raw(&raw_result::floor_p999));
  std::printf("end-to-end latency ms p50 %.2f  p99 %.2f\n", med(&run_result::e2e_p50),
              med(&run_result::e2e_p99));
  if (o.rate > 0)
    std::printf("sender schedule lag max %.2f ms\n", med(&run_result::schedule_lag_max_ms));
  if (pid <= 0) {
    std::printf("broker CPU and memory: not measured (give --broker-pid with --bootstrap)\n");
    return 0;
  }
  std::printf(
      "broker CPU  %s producing, %s catch-up consume, %s fetch only (client: %s producing)\n",
      cores_text(med(&run_result::broker_cpu_produce)).c_str(),
      cores_text(med(&run_result::broker_cpu_consume)).c_str(),
      cores_text(med(&run_result::broker_cpu_fetch_only)).c_str(),
      cores_text(med(&run_result::client_cpu_produce)).c_str());
  std::printf("client CPU during catch-up consume %s, its busiest thread %s\n",
              cores_text(med(&run_result::client_cpu_consume)).c_str(),
              cores_text(med(&run_result::client_thread_max_consume)).c_str());
  std::printf("broker peak RSS %.1f MiB   target < 512 MiB %s\n", rss_mib,
              rss_mib < 512 ? "met" : "MISSED");
  return 0;
}

}  // namespace sluice::bench
